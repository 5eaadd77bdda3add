"""The ``kubesched`` command line."""

from __future__ import annotations

import importlib
from typing import Any

import click

import kubesched
from kubesched.app import fast_exit
from kubesched.app.version import KUBERNETES_RELEASE

#: Subcommands defined in other modules, imported on first use: name → "module:attribute".
LAZY_COMMANDS: dict[str, str] = {}


class _LazyGroup(click.Group):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The console script's entry (click's test runner calls ``main`` instead): a command that
        asked for it ends the process without interpreter teardown (app/fast_exit.py)."""
        fast_exit.reset()
        try:
            return super().__call__(*args, **kwargs)
        except SystemExit as e:
            fast_exit.exit_now_if_requested(e.code)
            raise

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, attr = target.split(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(kubesched.__version__, prog_name="kubesched",
                      message=f"%(prog)s %(version)s (Kubernetes {KUBERNETES_RELEASE})")
def main() -> None:
    """Custom Kubernetes scheduling in Python: one framework, three shells."""


def kubectl_plugin() -> None:
    """``kubectl-kubesched``: kubectl runs it for ``kubectl kubesched ARGS`` (plugins are found by
    their name on PATH), so ``kubectl kubesched explain POD`` is ``kubesched explain POD``."""
    main(prog_name="kubectl kubesched")


def kubectl_plugin_complete() -> None:
    """``kubectl_complete-kubesched``: what kubectl runs to complete ``kubectl kubesched ...``."""
    import sys

    from kubesched.app.completion import kubectl_plugin_completions

    click.echo("\n".join(kubectl_plugin_completions(main, sys.argv[1:])))


# -- shells ---------------------------------------------------------------------------------------
# Each shell registers its commands here, one line each: "name": "module:attribute". They are
# imported only when used, so `kubesched simulate` does not pay for the live/extender stacks.
LAZY_COMMANDS.update(
    {
        "simulate": "kubesched.simulate.command:simulate",
        "capacity": "kubesched.simulate.capacity_command:capacity",
        "compare": "kubesched.simulate.compare_command:compare",
        "sweep": "kubesched.simulate.sweep_command:sweep",
        "dump": "kubesched.simulate.dump_command:dump_command",
        "run": "kubesched.live.commands:run_command",
        "explain": "kubesched.live.commands:explain_command",
        "extender": "kubesched.extender.command:extender",
        "plugins": "kubesched.app.commands:plugins_command",
        "new-plugin": "kubesched.app.commands:new_plugin_command",
        "version": "kubesched.app.version:version_command",
        "completion": "kubesched.app.completion:completion_command",
    }
)


if __name__ == "__main__":
    main()
