"""The ``kubesched`` command line."""

from __future__ import annotations

import importlib

import click

import kubesched

#: Subcommands defined in other modules, imported on first use: name → "module:attribute".
LAZY_COMMANDS: dict[str, str] = {}


class _LazyGroup(click.Group):
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
@click.version_option(kubesched.__version__, prog_name="kubesched")
def main() -> None:
    """Custom Kubernetes scheduling in Python: one framework, three shells."""


# -- shells ---------------------------------------------------------------------------------------
# Each shell registers its commands here, one line each: "name": "module:attribute". They are
# imported only when used, so `kubesched simulate` does not pay for the live/extender stacks.
LAZY_COMMANDS.update(
    {
        "simulate": "kubesched.simulate.command:simulate",
        "run": "kubesched.live.commands:run_command",
        "explain": "kubesched.live.commands:explain_command",
        "extender": "kubesched.extender.command:extender",
        "plugins": "kubesched.app.commands:plugins_command",
        "new-plugin": "kubesched.app.commands:new_plugin_command",
    }
)


if __name__ == "__main__":
    main()
