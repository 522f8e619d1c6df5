"""A destination's own transforms in its writer path: the writer sees the rows its chain produced.

The wrapper keeps the writer's contract (:class:`wormhole.plugins.base.Writer`, or
:class:`~wormhole.plugins.base.SplitWriter` for a destination that makes splits durable) and
reports the rows its filters dropped as ``filtered``, so delivered = written + rejected + filtered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wormhole.plugins.base import Batch, SplitWriter, WriteResult
from wormhole.transform.chain import ChainRunner


class TransformingWriter:
    def __init__(self, inner: Any, runner: ChainRunner) -> None:
        self.inner = inner
        self.runner = runner

    def open(self) -> None:
        self.inner.open()

    def write(self, batch: Batch) -> WriteResult:
        return self._through(batch, self.inner.write)

    def _through(self, batch: Batch, write: Callable[[Batch], WriteResult]) -> WriteResult:
        """``batch`` through the chain, what is left written by ``write``; the rows dropped are ``filtered``."""
        out = self.runner.run(batch)
        if not out:
            return WriteResult(written=0, filtered=len(batch))
        result = write(out)
        return WriteResult(written=result.written, rejected=result.rejected, filtered=len(batch) - len(out),
                           stopped=result.stopped)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()


class TransformingSplitWriter(TransformingWriter):
    def write_split(self, split_id: str, batch: Batch) -> WriteResult:
        return self._through(batch, lambda out: self.inner.write_split(split_id, out))

    def end_split(self, split_id: str, rows: int) -> None:
        self.inner.end_split(split_id, rows)

    def abort_split(self, split_id: str) -> None:
        self.inner.abort_split(split_id)


def transforming(inner: Any, runner: ChainRunner | None) -> Any:
    """``inner`` with the destination's chain in front of it (``inner`` itself without one)."""
    if runner is None or not runner.chain.ops:
        return inner
    return TransformingSplitWriter(inner, runner) if isinstance(inner, SplitWriter) else \
        TransformingWriter(inner, runner)
