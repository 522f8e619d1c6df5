"""The per-destination judge: row accounting and the record and percentage limits."""

from __future__ import annotations

from wormhole.config import ErrorLimit
from wormhole.monitor import DestinationTotals, judge


def totals(delivered: int, written: int, rejected: int) -> DestinationTotals:
    return DestinationTotals(delivered=delivered, written=written, rejected=rejected, bytes=0)


class TestJudge:
    def test_clean_destination_succeeds(self) -> None:
        """All rows queued, delivered and written: no reason to fail."""
        assert judge(rows_sent=100, rows_queued=100, totals=totals(100, 100, 0), limit=ErrorLimit(record=0)) is None

    def test_record_limit_is_inclusive(self) -> None:
        """Exactly `record` rejected rows pass; one more fails, and the reason names the limit."""
        assert judge(rows_sent=100, rows_queued=100, totals=totals(100, 97, 3), limit=ErrorLimit(record=3)) is None
        reason = judge(rows_sent=100, rows_queued=100, totals=totals(100, 96, 4), limit=ErrorLimit(record=3))
        assert reason and "record limit of 3" in reason

    def test_percentage_limit(self) -> None:
        """Rejected share above the percentage fails; at or below passes."""
        limit = ErrorLimit(percentage=0.05)
        assert judge(rows_sent=100, rows_queued=100, totals=totals(100, 95, 5), limit=limit) is None
        reason = judge(rows_sent=100, rows_queued=100, totals=totals(100, 94, 6), limit=limit)
        assert reason and "percentage limit" in reason

    def test_no_limit_means_unbounded(self) -> None:
        """An ErrorLimit with neither key set accepts any number of rejected rows."""
        assert judge(rows_sent=10, rows_queued=10, totals=totals(10, 0, 10), limit=ErrorLimit()) is None

    def test_lost_rows_fail_the_destination(self) -> None:
        """Rows sent but not queued, queued but not delivered, or delivered but unaccounted, all fail."""
        lim = ErrorLimit()
        assert "never reached" in (judge(rows_sent=10, rows_queued=9, totals=totals(9, 9, 0), limit=lim) or "")
        assert "never delivered" in (judge(rows_sent=10, rows_queued=10, totals=totals(9, 9, 0), limit=lim) or "")
        assert "accounting" in (judge(rows_sent=10, rows_queued=10, totals=totals(10, 8, 1), limit=lim) or "")
