"""Commands about plugins themselves: ``kubesched plugins`` and ``kubesched new-plugin``."""

from __future__ import annotations

from pathlib import Path

import click

from kubesched.app.options import plugins_option
from kubesched.app.startup import UserError, load_registry


@click.command("plugins")
@plugins_option
def plugins_command(plugin_modules: tuple[str, ...]) -> None:
    """List the plugins kubesched can use: built-in, from installed packages' `kubesched.plugins`
    entry points, and from --plugins; with their extension points, the objects they read and where
    each came from."""
    from kubesched.app.render import console
    from kubesched.framework.interfaces import extension_points_of

    registry = load_registry(plugin_modules)
    from rich.table import Table

    t = Table(title=f"{len(registry.names())} plugins")
    for col in ("name", "extension points", "reads", "from"):
        t.add_column(col, overflow="fold")
    for name in registry.names():
        cls = registry.get(name)
        assert cls is not None
        kinds = ", ".join(k.name for k in cls.object_kinds) or "-"
        t.add_row(name, ", ".join(extension_points_of(cls)), kinds, registry.origin(name) or "-")
    console().print(t)


@click.command("new-plugin")
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to write the package (default: ./kubesched-<name>).")
def new_plugin_command(name: str, directory: Path | None) -> None:
    """Write a pip-installable plugin package NAME (CamelCase): plugin and args model, tests with
    kubesched.testing, a configuration example, and the `kubesched.plugins` entry point."""
    from kubesched.app.scaffold import check_name, next_steps, snake, write

    problem = check_name(name)
    if problem:
        raise UserError(problem)
    target = directory or Path(f"kubesched-{snake(name).replace('_', '-')}")
    if target.exists():
        raise UserError(f"{target}: already exists; pick another --dir")
    for path in write(name, target):
        click.echo(f"wrote {path}")
    click.echo(next_steps(target))
