"""When a run's rows travel in the source's own encoding (:mod:`wormhole.planning.encoded`): only when every
live destination takes it, never with transforms or in Spark mode, and never at the price of a run (a source
whose catalog cannot be read a moment gets values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog
from structlog.testing import capture_logs

from wormhole.errors import SplitError
from wormhole.planning.encoded import choose_encoding
from wormhole.plugins.base import Encoding, SinkRole
from wormhole.plugins.facets import EncodedWriteFacet

ENCODING = Encoding("postgres.copy_binary", ("bigint", "text"))


@dataclass
class Readers:
    answer: Encoding | Exception | None = ENCODING
    asked: int = 0

    def encoding(self) -> Encoding | None:
        self.asked += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@dataclass
class Periphery:
    types: tuple[str, ...] = ENCODING.columns

    def takes_encoding(self, encoding: Encoding) -> bool:
        return encoding.columns == self.types


LOADS = SinkRole(options=object, periphery=Periphery, writer=object,  # type: ignore[arg-type]
                 encoded=EncodedWriteFacet(format=ENCODING.format, takes=Periphery.takes_encoding))
"""A destination's store that loads the encoding as it is (as postgres)."""
VALUES = SinkRole(options=object, periphery=Periphery, writer=object)  # type: ignore[arg-type]
"""One that takes values only (as file)."""


@dataclass
class Dest:
    id: str
    sink: Any = LOADS
    live: bool = True
    periphery: Any = field(default_factory=Periphery)


def choose(readers: Readers, dests: list[Dest], *, local: bool = True, transformed: bool = False) -> Any:
    with capture_logs() as logs:
        chosen = choose_encoding(readers, dests, local=local, transformed=transformed,  # type: ignore[arg-type]
                                 log=structlog.get_logger("test"))
    return chosen, [(e["event"], e.get("destinations"), e.get("reason")) for e in logs]


def test_every_live_postgres_destination_of_the_source_types_gets_the_encoding() -> None:
    gone = Dest("gone", live=False, periphery=None)  # failed at prepare: not asked
    chosen, events = choose(Readers(), [Dest("a"), Dest("b"), gone])
    assert chosen == ENCODING and events == [("engine.rows_encoded", ["a", "b"], None)]


def test_one_destination_of_other_types_keeps_the_run_on_values_and_is_named() -> None:
    chosen, events = choose(Readers(), [Dest("a"), Dest("b", periphery=Periphery(("bigint", "varchar(9)")))])
    assert chosen is None and events == [("engine.rows_decoded", ["b"], "column types differ")]


def test_another_store_transforms_or_spark_mode_never_ask_the_source() -> None:
    for dests, local, transformed in (([Dest("a"), Dest("j", sink=VALUES)], True, False),
                                      ([Dest("a")], False, False), ([Dest("a")], True, True)):
        readers = Readers()
        assert choose(readers, dests, local=local, transformed=transformed) == (None, [])
        assert readers.asked == 0


def test_a_source_whose_types_cannot_be_read_now_gets_values_instead_of_failing_the_run() -> None:
    chosen, events = choose(Readers(SplitError("connection refused")), [Dest("a")])
    assert chosen is None
    assert events == [("engine.rows_decoded", None, "the source's column types could not be read: connection refused")]
