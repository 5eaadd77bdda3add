"""The doc lines of kubesched's cluster subcommands run as written against the real control plane.

tests/unit/test_docs_commands.py runs every other command README.md and docs/*.md show; it skips
the lines of ``run``, ``explain``, ``dump`` and a serving ``extender`` with a reason naming this
file, and this test selects exactly those lines by that reason. So a new doc line of these
subcommands runs here, never skipped silently.

Each line runs with bash from its page's scratch directory (``make_workspace``: examples/, the
page's own files, the kubesched under test on PATH), against a cluster holding what the docs name:
the namespaces ``shop`` and ``web``, the pods ``shop/web-7`` and ``shop/my-pod`` (pending for the
profile of examples/ip-scheduler.yaml, held back by a nodeSelector no node matches, so ``explain``
has something to explain), two pods bound in ``web`` and three KWOK nodes. What the docs leave to
the reader comes from the small tables below (PLACEHOLDERS, ENV, TLS_FILES, ADDRESS_OPTION); a line
still holding a placeholder after them (``~``, an upper-case word such as HOST) fails.

- ``dump``: exits 0 and its ``-o`` file loads as ``simulate --cluster`` loads it, with the
  nodes and the pending pods;
- ``explain``: exits 0 and names the pod;
- ``run``: in the background until it has bound a fresh pod of its profile, ``/healthz`` answers
  on its health address; then SIGTERM: exit 0;
- ``extender``: serving, ``/readyz`` answers 200 (over mutual TLS when the line serves it); then
  SIGTERM: exit 0.

No line may print a traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kubesched.simulate.inputs.dump import load_cluster
from kubesched.testing.controlplane import ApiError, ComponentDied, ControlPlane, free_port, wait_for
from kubesched.testing.controlplane.certs import PKI
from unit.test_docs_commands import (
    ALL,
    CLUSTER_TEST,
    REPO,
    DocCommand,
    command_words,
    make_workspace,
    why_not_run,
)

pytestmark = pytest.mark.integration

#: Doc text → what the test runs instead. ``{kubeconfig}``: the control plane's admin kubeconfig;
#: ``{port}``: a free port (the docs' fixed ports may be held by anything else on the machine).
PLACEHOLDERS = {
    "~/.kube/config": "{kubeconfig}",
    "~/kc": "{kubeconfig}",
    "my-scheduler.yaml": "examples/ip-scheduler.yaml",
    "my_plugins": "examples/plugins/node_quota",
    "127.0.0.1:8888": "127.0.0.1:{port}",
    "0.0.0.0:10251": "127.0.0.1:{port}",
}
#: Environment of every line: the current context is the control plane's; ``$SALT`` as a reader sets it.
ENV = {"KUBECONFIG": "{kubeconfig}", "SALT": "docs-test-salt"}
#: Certificate files the docs name, written into the scratch directory (signed by its ``ca.crt``).
TLS_FILES = ("s.crt", "s.key", "ca.crt")
#: A server line without its address option gets one on a free port, for the same reason.
ADDRESS_OPTION = {"run": "--health-addr", "extender": "--listen"}
#: What the docs name in the cluster.
NAMESPACES = ("shop", "web")
PENDING_PODS = (("shop", "web-7"), ("shop", "my-pod"))
NOWHERE = {"kubesched.test/docs": "no-such-node"}
#: Bounded waits (seconds): a server coming up, a bind, a drain after SIGTERM.
READY_S, BIND_S, STOP_S = 60.0, 60.0, 30.0

LINES = [c for c in ALL if CLUSTER_TEST in (why_not_run(c) or "")]


def subcommand(command: DocCommand) -> str:
    return next(w for w in command_words(command)[1:] if not w.startswith("-"))


@pytest.fixture(scope="module")
def docs_cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The control plane holding what the docs name; removed afterwards."""
    cp = control_plane
    profile = scheduler_name(REPO / "examples/ip-scheduler.yaml")
    nodes = cp.create_nodes(3, prefix="docs-node-", cpu="8", memory="32Gi")
    for ns in NAMESPACES:
        cp.create_namespace(ns)
    for ns, name in PENDING_PODS:
        cp.create_pod(name, ns, scheduler_name=profile, node_selector=NOWHERE, requests={"cpu": "100m"})
    for i, node in enumerate(nodes[:2]):
        cp.create_pod(f"web-{i}", "web", node_name=node, requests={"cpu": "500m"}, labels={"app": "web"})
    try:
        yield cp
    finally:
        for ns in NAMESPACES:
            with contextlib.suppress(ApiError):
                for pod in cp.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
                    cp.delete_pod(pod["metadata"]["name"], ns, grace_period=0)
                cp.api("DELETE", f"/api/v1/namespaces/{ns}")
        for node in nodes:
            with contextlib.suppress(ApiError):
                cp.api("DELETE", f"/api/v1/nodes/{node}")


def scheduler_name(config: Path) -> str:
    """The first profile's schedulerName of a KubeSchedulerConfiguration file."""
    return str(yaml.safe_load(config.read_text())["profiles"][0]["schedulerName"])


def without_comment(text: str) -> str:
    stripped = re.sub(r"\s+#.*$", "", text)
    assert shlex.split(stripped) == shlex.split(text, comments=True), f"cannot strip the comment of `{text}`"
    return stripped


def as_run(command: DocCommand, kubeconfig: Path) -> tuple[str, list[str]]:
    """The line as the test runs it (PLACEHOLDERS substituted, ``[--optional]`` groups given, an
    address option added to a server line without one) and its words."""
    text = re.sub(r"\[(-[^\[\]]+)\]", r"\1", without_comment(command.text))
    for doc, ours in PLACEHOLDERS.items():
        text = text.replace(doc, ours.format(kubeconfig=kubeconfig, port=free_port()))
    option = ADDRESS_OPTION.get(subcommand(command))
    if option and not re.search(rf"\s{option}[\s=]", text):
        text += f" {option} 127.0.0.1:{free_port()}"
    words = shlex.split(text)
    unknown = [w for w in words if w.startswith("~") or re.search(r"(?<![$\w])[A-Z][A-Z0-9_]{2,}\b", w)]
    assert not unknown, (f"{command.where}: `{command.text}`: placeholder {unknown} is not in PLACEHOLDERS / ENV "
                         f"of {CLUSTER_TEST}: add what the test should run instead")
    return text, words


def option_value(words: list[str], *names: str) -> str | None:
    for i, w in enumerate(words):
        for name in names:
            if w == name and i + 1 < len(words):
                return words[i + 1]
            if w.startswith(f"{name}="):
                return w.split("=", 1)[1]
    return None


# -- one runner per subcommand -------------------------------------------------------------------
@dataclass
class Line:
    command: DocCommand
    text: str
    words: list[str]
    root: Path
    env: dict[str, str]
    cp: ControlPlane

    def run(self) -> str:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", self.text], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=300)
        output = proc.stdout[-3000:] + proc.stderr[-3000:]
        assert proc.returncode == 0, f"{self.where}: exited {proc.returncode}\n{output}"
        assert "Traceback" not in proc.stderr, f"{self.where}\n{output}"
        return proc.stdout + proc.stderr

    @contextlib.contextmanager
    def serving(self) -> Iterator[Callable[[], None]]:
        """The line in the background; yields a check that it still runs. On leaving: SIGTERM, and
        it must exit 0 within STOP_S without a traceback."""
        log = self.root / f"line-{self.command.line}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(["bash", "-euo", "pipefail", "-c", f"exec {self.text}"], cwd=self.root,
                                     env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

            def still_running() -> None:
                if popen.poll() is not None:
                    text = log.read_text(errors="replace")
                    raise ComponentDied(f"{self.where}: exited {popen.returncode} while serving\n{text[-3000:]}")

            try:
                yield still_running
                popen.send_signal(signal.SIGTERM)
                code = popen.wait(STOP_S)
            finally:
                if popen.poll() is None:
                    popen.kill()
                    popen.wait(10)
        text = log.read_text(errors="replace")
        assert code == 0, f"{self.where}: exited {code} after SIGTERM\n{text[-3000:]}"
        assert "Traceback" not in text, f"{self.where}\n{text[-3000:]}"

    @property
    def where(self) -> str:
        return f"{self.command.where}: `{self.command.text}` run as `{self.text}`"


def get(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def run_dump(line: Line) -> None:
    """Exit 0, and the file loads as ``simulate --cluster`` loads it, with the docs' nodes and pods."""
    line.run()
    out = option_value(line.words, "-o", "--output")
    assert out, f"{line.where}: no -o file to check"
    dumped = load_cluster(line.root / out)
    pending = [p for p in dumped.pods if not p["spec"].get("nodeName")]
    assert len(dumped.nodes) >= 3 and len(pending) >= len(PENDING_PODS), (
        f"{line.where}: {out} holds {len(dumped.nodes)} nodes and {len(pending)} pending pods")


def run_explain(line: Line) -> None:
    pod = line.words[line.words.index("explain") + 1]  # NAME or NAMESPACE/NAME
    assert pod.split("/")[-1] in line.run(), f"{line.where}: the answer does not name {pod}"


def run_scheduler(line: Line) -> None:
    cp = line.cp
    config = option_value(line.words, "--config")
    profile = scheduler_name(line.root / config) if config else "default-scheduler"
    addr = option_value(line.words, "--health-addr")
    name = f"run-{line.command.path.stem.lower()}-{line.command.line}"
    cp.create_pod(name, "shop", scheduler_name=profile, requests={"cpu": "100m"})
    with line.serving() as still_running:
        wait_for(lambda: still_running() or cp.get_pod(name, "shop")["spec"].get("nodeName"), BIND_S, 0.2,
                 f"{line.where}: binds shop/{name}")
        assert get(f"http://{addr}/healthz") == 200, f"{line.where}: /healthz on {addr}"


def run_extender(line: Line) -> None:
    listen = option_value(line.words, "--listen")
    context = None
    if "--tls-cert" in line.words:
        context = ssl.create_default_context(cafile=line.root / "ca.crt")
        context.load_cert_chain(line.root / "client.crt", line.root / "client.key")
    url = f"{'https' if context else 'http'}://{listen}/readyz"
    with line.serving() as still_running:
        wait_for(lambda: still_running() or get(url, context) == 200, READY_S, 0.2, f"{line.where}: {url}")


RUNNERS: dict[str, Callable[[Line], None]] = {
    "dump": run_dump, "explain": run_explain, "run": run_scheduler, "extender": run_extender,
}


def test_the_docs_show_each_cluster_subcommand() -> None:
    assert {subcommand(c) for c in LINES} == set(RUNNERS), "a runner lost its doc lines, or lines lost their runner"


@pytest.mark.parametrize("command", LINES, ids=[c.where for c in LINES])
def test_cluster_doc_line_runs_as_written(command: DocCommand, docs_cluster: ControlPlane, tmp_path: Path) -> None:
    runner = RUNNERS.get(subcommand(command))
    assert runner, f"{command.where}: `{command.text}`: no runner for `kubesched {subcommand(command)}` in this test"
    root = make_workspace(command.path, tmp_path / "ws")
    pki = PKI(root)  # ca.crt (+ ca.key) in the scratch directory, as the docs' files
    pki.issue("s", "127.0.0.1", ips=["127.0.0.1"], dns=["localhost"], server=True)
    pki.issue("client", "docs-test", client=True)
    assert all((root / f).exists() for f in TLS_FILES)
    kubeconfig = docs_cluster.kubeconfig
    env = {**os.environ, "PATH": f"{root / '.venv/bin'}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "120",
           **{k: v.format(kubeconfig=kubeconfig) for k, v in ENV.items()}}
    text, words = as_run(command, kubeconfig)
    runner(Line(command, text, words, root, env, docs_cluster))
