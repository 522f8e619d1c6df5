"""``wormhole plugins [NAME]``: the available stores and their parameters."""

from __future__ import annotations

import click

from wormhole.cli.common import fail, global_options
from wormhole.errors import WormholeError
from wormhole.plugins import describe, registry


@click.command("plugins")
@click.argument("name", required=False)
@click.option("--markdown", is_flag=True,
              help="Print the parameter tables as markdown (docs/manual/store-parameters.md).")
@global_options
def plugins(name: str | None, markdown: bool) -> None:
    """List the available stores; with NAME, that store's parameters (name, type, default, description)."""
    if name is None and not markdown:
        for plugin_name in registry.names():
            plugin = registry.get(plugin_name)
            roles = "/".join(r for r, v in (("source", plugin.source), ("destination", plugin.sink)) if v)
            click.echo(f"{plugin_name:<10} {roles:<20} {plugin.description}")
        return
    try:
        chosen = [registry.get(name)] if name is not None else [registry.get(n) for n in registry.names()]
    except WormholeError as exc:
        fail(exc)
    if markdown:
        click.echo("\n\n".join(describe.render_markdown(p) for p in chosen))
    else:
        click.echo("\n\n".join(describe.render_text(p) for p in chosen))
