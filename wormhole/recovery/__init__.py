"""Recovery: what lets a run of a task resume the runs before it, and never write a split twice.

- :mod:`.checkpoint`: the checkpoint rows (each of a kind: plan, window, durable, commit), the thread that
  writes them, and what recovery needs of the task database (``CheckpointStore``, ``RunHistory``: the task
  database implements them and imports this module; recovery imports nothing of it);
- :mod:`.chain`: what the chain of runs a run continues recorded, read by row kind;
- :mod:`.state`: :class:`~wormhole.recovery.state.RecoveryState`, what the chain of runs already holds,
  built before the managers and handed to their constructors;
- :mod:`.coordinator`: the split coordinator (which destination still lacks which split) and its
  listener protocol;
- :mod:`.split_lane`: one writer thread of a destination that makes splits durable;
- :mod:`.lease`: the run's claim on its task, as the writers see it;
- :mod:`.leftovers`: what runs left in their destinations (``task show``, ``task clean``);
- :mod:`.crash`: the seam through which tests install crash points (a no-op in production).

This ``__init__`` imports nothing: the task database imports :mod:`.checkpoint`, and the package must
not pull the runtime in with it.
"""
