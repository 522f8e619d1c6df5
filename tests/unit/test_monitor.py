"""The verdicts: the per-destination judge (row accounting, record and percentage limits), typed with codes."""

from __future__ import annotations

from wormhole.config import ErrorLimit
from wormhole.counters import DestinationTotals, Verdict, judge, percentage_limit, record_limit
from wormhole.errors import DirtyLimitExceeded, RowsUnaccounted


def totals(delivered: int, written: int, rejected: int) -> DestinationTotals:
    return DestinationTotals(delivered=delivered, written=written, rejected=rejected, bytes=0)


def verdict(**kw: object) -> Verdict:
    v = judge(**kw)  # type: ignore[arg-type]
    assert v is not None
    return v


class TestJudge:
    def test_clean_destination_succeeds(self) -> None:
        """All rows queued, delivered and written: no reason to fail."""
        assert judge(rows_sent=100, rows_queued=100, totals=totals(100, 100, 0), limit=ErrorLimit(record=0)) is None

    def test_record_limit_is_inclusive(self) -> None:
        """Exactly `record` rejected rows pass; one more fails with the limit's code, naming the limit."""
        assert judge(rows_sent=100, rows_queued=100, totals=totals(100, 97, 3), limit=ErrorLimit(record=3)) is None
        v = verdict(rows_sent=100, rows_queued=100, totals=totals(100, 96, 4), limit=ErrorLimit(record=3))
        assert v.code == DirtyLimitExceeded.code == "DIRTY_LIMIT_EXCEEDED"
        assert v.message == "4 rejected rows exceed the record limit of 3"

    def test_percentage_limit(self) -> None:
        """Rejected share above the percentage fails; at or below passes."""
        limit = ErrorLimit(percentage=0.05)
        assert judge(rows_sent=100, rows_queued=100, totals=totals(100, 95, 5), limit=limit) is None
        v = verdict(rows_sent=100, rows_queued=100, totals=totals(100, 94, 6), limit=limit)
        assert v.code == DirtyLimitExceeded.code and "percentage limit" in v.message

    def test_no_limit_means_unbounded(self) -> None:
        """An ErrorLimit with neither key set accepts any number of rejected rows."""
        assert judge(rows_sent=10, rows_queued=10, totals=totals(10, 0, 10), limit=ErrorLimit()) is None

    def test_lost_rows_fail_the_destination(self) -> None:
        """Rows sent but not queued, queued but not delivered, or delivered but unaccounted, all fail with
        ROWS_UNACCOUNTED, even when the message mentions nothing about limits (the code is not guessed)."""
        lim = ErrorLimit(record=0)
        for v, words in [
            (verdict(rows_sent=10, rows_queued=9, totals=totals(9, 9, 0), limit=lim), "never reached"),
            (verdict(rows_sent=10, rows_queued=10, totals=totals(9, 9, 0), limit=lim), "never delivered"),
            (verdict(rows_sent=10, rows_queued=10, totals=totals(10, 8, 1), limit=lim), "accounting"),
        ]:
            assert v.code == RowsUnaccounted.code == "ROWS_UNACCOUNTED" and words in v.message


def test_one_record_limit_rule_for_source_and_destinations() -> None:
    """The same rule (more than `record` fails) with the source's and a destination's wording."""
    assert record_limit(5, None) is None and record_limit(5, 5) is None
    assert str(record_limit(6, 5)) == "6 rejected rows exceed the record limit of 5"
    src = record_limit(6, 5, source=True)
    assert src is not None and src.message == "the source rejected 6 rows, over the record limit of 5"
    assert percentage_limit(1, 0, 0.0) is None  # nothing read: no share to judge
    assert percentage_limit(2, 100, 0.01, source=True) is not None
