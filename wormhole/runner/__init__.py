"""The runner: what runs a task of the task database once the CLI has parsed its arguments.

The CLI (``wormhole --task-id N``, ``wormhole run FILE``) hands a finished :class:`RunRequest` to
:func:`wormhole.runner.run.run_task`; a child of ``wormhole daemon`` is such a run, adopting the claim its
daemon took (the daemon makes its command from the request, :meth:`RunRequest.child_argv`). The claim, its
heartbeat and lease (:mod:`~wormhole.runner.claim`), the patience with a task database that refuses
(:mod:`~wormhole.runner.patience`) and the engine's run under the claim (:mod:`~wormhole.runner.engine_run`)
are here, below the CLI and beside the daemon.
"""

from wormhole.runner.observers import RunObservers
from wormhole.runner.request import RunRequest

# run_task (wormhole.runner.run) is not imported here: the daemon imports the runner's claim and request
# without the engine, which only its children load.
__all__ = ["RunObservers", "RunRequest"]
