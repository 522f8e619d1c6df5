"""The run's dirty-record file: every rejected row, with where it was rejected and why (JSON lines)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from wormhole.plugins.base import Rejected


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(value).decode("ascii")}
    return repr(value)


class DirtyFile:
    """Thread-safe DirtySink writing ``{"origin", "split", "reason", "row"}`` lines; opened on first use.

    ``origin`` is ``source`` for rows the reader could not convert, else the destination id.
    Strings that cannot be encoded (lone surrogates) are written escaped, so the file stays valid.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts: dict[str, int] = {}
        self.firsts: dict[str, str] = {}
        """Each origin's first rejection's reason: a failure over the limits names it."""
        self._lock = threading.Lock()
        self._file: IO[str] | None = None

    def reject(self, origin: str, rows: Sequence[Rejected], split_id: str | None = None) -> None:
        lines = "".join(
            json.dumps({"origin": origin, "split": split_id, "reason": r.reason, "row": list(r.row)},
                       default=_jsonable, ensure_ascii=True) + "\n"
            for r in rows)
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(lines)
            self._file.flush()
            self.counts[origin] = self.counts.get(origin, 0) + len(rows)
            if rows:
                self.firsts.setdefault(origin, rows[0].reason)

    def count(self, origin: str) -> int:
        return self.counts.get(origin, 0)

    def first(self, origin: str) -> str | None:
        """Why ``origin``'s first rejected row (in the file) was rejected; None before any."""
        with self._lock:
            return self.firsts.get(origin)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
