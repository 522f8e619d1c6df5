"""``wormhole console`` and ``wormhole daemon --http``: the operations console's options (:mod:`wormhole.web`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from wormhole import log
from wormhole.cli.common import fail, global_options
from wormhole.errors import ConfigError, WormholeError

HTTP_HELP = ("Serve the operations console (web page and JSON API) on HOST:PORT; a HOST other than loopback "
             "needs the token for every request (docs/manual/console.md).")
TOKEN_FILE_HELP = ("File of console tokens, one a line (`name:token`); with WORMHOLE_CONSOLE_TOKEN. Without either, "
                   "one is made in var/console.token.")


def _listen(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    from wormhole.web.settings import parse_listen

    try:
        return parse_listen(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def console_options(default: str | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option("--token-file", metavar="FILE", help=TOKEN_FILE_HELP)(command)
        return click.option("--http", "http", metavar="HOST:PORT", default=default, callback=_listen,
                            show_default=default is not None, help=HTTP_HELP)(command)
    return decorate


def console_settings(ctx: click.Context, http: tuple[str, int], token_file: str | None) -> Any:
    """The console's settings from the command's options; a bad token file exits 204."""
    try:
        from wormhole.web.settings import ConsoleSettings, Tokens
    except ImportError as exc:  # the `console` extra is not installed
        fail(ConfigError(f"the console needs starlette and uvicorn (pip install 'wormhole[console]'): {exc}"))
    try:
        tokens = Tokens.load(token_file)
    except WormholeError as exc:
        fail(exc)
    return ConsoleSettings(host=http[0], port=http[1], task_db=ctx.obj.task_db, conf_dir=ctx.obj.conf_dir,
                           tokens=tokens)


@click.command("console")
@console_options("127.0.0.1:8080")
@global_options
@click.pass_context
def console(ctx: click.Context, http: tuple[str, int], token_file: str | None) -> None:
    """Serve the operations console (tasks, runs, live progress, rejected rows; submit, retry, cancel, pause)
    without running tasks: `wormhole daemon --http HOST:PORT` serves the same beside its tasks."""
    from wormhole.web.server import serve

    settings = console_settings(ctx, http, token_file)
    ctx.exit(serve(settings, log.get_logger(component="console")))
