"""``wormhole daemon``: the CLI side of :mod:`wormhole.daemon`."""

from __future__ import annotations

import click

from wormhole.cli.common import global_options
from wormhole.cli.console import console_options, console_settings
from wormhole.cli.observe import HOST_HELP, PORT_TYPE


@click.command("daemon")
@click.option("--max-tasks", type=click.IntRange(1, 1000), default=4, show_default=True,
              help="Tasks run at once, each in its own `wormhole --task-id N` process.")
@click.option("--poll-s", type=click.FloatRange(0.05, 3600), default=2.0, show_default=True,
              help="Seconds between looks for pending tasks.")
@click.option("--grace-s", type=click.FloatRange(0, 86_400), default=60.0, show_default=True,
              help="On SIGTERM/SIGINT, how long running tasks may go on before they are sent SIGTERM.")
@click.option("--heartbeat-s", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
              help="Seconds between updates of this daemon's row in wormhole_daemon.")
@click.option("--metrics-port", type=PORT_TYPE, metavar="PORT",
              help="Serve the daemon's Prometheus metrics on this port (0: any free port, logged).")
@click.option("--metrics-host", metavar="HOST", help=f"{HOST_HELP}  [default: 127.0.0.1]")
@click.option("--take-over/--no-take-over", default=True, show_default=True,
              help="Also take over running tasks whose heartbeat is older than claim.stale_s (engine.toml), "
                   "and resume them.")
@console_options(None)
@global_options
@click.pass_context
def daemon(ctx: click.Context, max_tasks: int, poll_s: float, grace_s: float, heartbeat_s: float,
           metrics_port: int | None, metrics_host: str | None, take_over: bool, http: tuple[str, int] | None,
           token_file: str | None) -> None:
    """Claim pending tasks (highest priority, then oldest) and run them until SIGTERM or SIGINT; take over
    and resume running tasks whose process is gone (their heartbeat is stale)."""
    from wormhole.daemon import Daemon, DaemonOptions

    st = ctx.obj
    console = None if http is None else console_settings(ctx, http, token_file)
    ctx.exit(Daemon(DaemonOptions(task_db=st.task_db, conf_dir=st.conf_dir, log_format=st.log_format,
                                  log_level=st.log_level, max_tasks=max_tasks, poll_s=poll_s, grace_s=grace_s,
                                  heartbeat_s=heartbeat_s,
                                  metrics_port=metrics_port if metrics_port is not None else st.metrics_port,
                                  metrics_host=metrics_host or st.metrics_host, take_over=take_over,
                                  console=console)).run())
