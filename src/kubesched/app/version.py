"""``kubesched version``: kubesched's own version and the Kubernetes release whose scheduler it mirrors.

``KUBERNETES_RELEASE`` is the one place the package names that release (hack/cluster/versions.env
pins the same one for the local control plane but is not in the wheel;
tests/unit/test_version.py holds the two equal)."""

from __future__ import annotations

import platform

import click
import orjson

import kubesched

#: The k8s.io/kubernetes release whose kube-scheduler is kubesched's spec (semantics, messages,
#: defaults) and whose control plane the integration tests run against.
KUBERNETES_RELEASE = "v1.37.1"


def version_info() -> dict[str, str]:
    return {
        "kubeschedVersion": kubesched.__version__,
        "kubernetesRelease": KUBERNETES_RELEASE,
        "pythonVersion": platform.python_version(),
        "platform": f"{platform.system().lower()}/{platform.machine()}",
    }


@click.command("version")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one object, for scripts (as `kubectl version -o json`).")
def version_command(output: str) -> None:
    """Print kubesched's version and the Kubernetes release whose scheduler it follows."""
    info = version_info()
    if output == "json":
        click.echo(orjson.dumps(info, option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(f"kubesched {info['kubeschedVersion']}")
    click.echo(f"Kubernetes {info['kubernetesRelease']} (the kube-scheduler release kubesched follows)")
    click.echo(f"Python {info['pythonVersion']} ({info['platform']})")
