"""Shell completion, click's own: ``kubesched completion SHELL`` prints the script to source, and
``kubectl_complete-kubesched`` answers kubectl's plugin completion protocol.

kubectl (v1.26+) completes ``kubectl kubesched ...`` by running ``kubectl_complete-kubesched`` with
the words typed so far, the last one being the word under the cursor, and reading one candidate per
line followed by cobra's ``:<directive>`` line (kubectl's pkg/cmd/plugin completion, cobra's
``ShellCompDirective``)."""

from __future__ import annotations

from collections.abc import Sequence

import click
from click.shell_completion import ShellComplete, get_completion_class

#: cobra ShellCompDirective values (github.com/spf13/cobra completions.go).
_COBRA_DEFAULT = 0  # the shell may fall back to file names
_COBRA_NO_FILE_COMP = 4

SHELLS = ("bash", "zsh", "fish")


def completion_source(group: click.Command, shell: str, prog_name: str = "kubesched") -> str:
    """The script a shell sources to complete ``prog_name`` (it calls the program back with
    ``_KUBESCHED_COMPLETE=<shell>_complete``, which click handles in every command's ``main``)."""
    cls = get_completion_class(shell)
    if cls is None:  # click.Choice already refuses other names; kept for direct callers
        raise click.BadParameter(f"unknown shell {shell!r}; one of {', '.join(SHELLS)}")
    complete_var = "_{}_COMPLETE".format(prog_name.replace("-", "_").upper())
    return cls(group, {}, prog_name, complete_var).source()


def kubectl_plugin_completions(group: click.Command, words: Sequence[str]) -> list[str]:
    """Lines for kubectl's plugin completion: the candidates for the last of ``words``, then the
    directive (no file names unless the parameter being completed is a path)."""
    args, incomplete = list(words[:-1]), (words[-1] if words else "")
    items = ShellComplete(group, {}, "kubectl kubesched", "_KUBESCHED_COMPLETE").get_completions(args, incomplete)
    files = any(item.type in ("file", "dir") for item in items)
    lines = [item.value for item in items if item.type == "plain"]
    lines.append(f":{_COBRA_DEFAULT if files else _COBRA_NO_FILE_COMP}")
    return lines


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_command(shell: str) -> None:
    """Print the completion script for SHELL. bash: `source <(kubesched completion bash)` (or save it
    under /etc/bash_completion.d/); zsh: `source <(kubesched completion zsh)`; fish:
    `kubesched completion fish > ~/.config/fish/completions/kubesched.fish`."""
    root = click.get_current_context().find_root().command
    click.echo(completion_source(root, shell), nl=False)
