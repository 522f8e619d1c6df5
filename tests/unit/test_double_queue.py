"""DoubleQueue, RAMStorage and the exchanger under concurrency: nothing lost, nothing twice, no hang."""

from __future__ import annotations

import threading
import time

import pytest

from wormhole.config import ExchangeConf
from wormhole.errors import TaskAborted
from wormhole.exchange import BufferedLineExchanger, DoubleQueue, Parcel, QueueClosed, RAMStorage
from wormhole.exchange.throttle import Throttle
from wormhole.plugins.batch import Batch, EncodedRows, Encoding, rows_of


def batch(tag: int, rows: int = 10) -> Parcel:
    return Parcel(tuple((tag, i) for i in range(rows)), nbytes=rows * 10)


def drain(q: DoubleQueue, out: list[Parcel], timeout: float = 0.05) -> None:
    while True:
        try:
            b = q.pull(timeout)
        except QueueClosed:
            return
        if b is not None:
            out.append(b)


class TestDoubleQueue:
    def test_many_producers_and_consumers_lose_and_duplicate_nothing(self) -> None:
        """8 producers x 500 batches through a small queue to 6 consumers: every batch exactly once."""
        q = DoubleQueue(capacity_rows=200, capacity_bytes=10**9, spill_rows=30)
        got: list[list[Parcel]] = [[] for _ in range(6)]
        consumers = [threading.Thread(target=drain, args=(q, got[i])) for i in range(6)]
        for t in consumers:
            t.start()

        def produce(p: int) -> None:
            for i in range(500):
                assert q.push(batch(p * 1000 + i), timeout=10)

        producers = [threading.Thread(target=produce, args=(p,)) for p in range(8)]
        for t in producers:
            t.start()
        for t in producers:
            t.join(30)
        q.close_input()
        for t in consumers:
            t.join(30)
            assert not t.is_alive()
        tags = sorted(b.rows[0][0] for out in got for b in out)
        assert tags == sorted(p * 1000 + i for p in range(8) for i in range(500))
        assert q.rows_in == q.rows_out == 8 * 500 * 10

    def test_a_lane_full_by_bytes_below_spill_rows_is_swapped_for_a_waiting_producer(self) -> None:
        """A wide batch fills the write side by bytes with fewer rows than spill_rows: the split's end
        marker behind it must still get in (it used to wait for room while the consumer waited for rows)."""
        q = DoubleQueue(capacity_rows=10_000, capacity_bytes=1_000, spill_rows=4_096)
        assert q.push(Parcel(((1, "x"),) * 5, nbytes=5_000, split_id="s"), timeout=1)
        got: list[Parcel] = []
        consumer = threading.Thread(target=lambda: got.append(q.pull(timeout=5)))  # type: ignore[arg-type]
        consumer.start()
        assert q.push(Parcel((), 0, "s", "end"), timeout=5), "the end marker never got in"
        consumer.join(5)
        assert got and len(got[0]) == 5

    def test_push_blocks_when_full_and_honours_timeout(self) -> None:
        """A full write side refuses a push after the timeout instead of blocking forever."""
        q = DoubleQueue(capacity_rows=20, capacity_bytes=10**9, spill_rows=20)
        assert q.push(batch(1), timeout=0.1)
        assert q.push(batch(2), timeout=0.1)
        start = time.monotonic()
        assert q.push(batch(3), timeout=0.2) is False
        assert 0.15 <= time.monotonic() - start < 2

    def test_bytes_bound_the_queue_too(self) -> None:
        """The byte capacity bounds the write side even when the row capacity is not reached."""
        q = DoubleQueue(capacity_rows=10**6, capacity_bytes=150, spill_rows=10**6)
        assert q.push(batch(1), timeout=0.1)  # 100 bytes
        assert q.push(batch(2), timeout=0.1) is False

    def test_oversized_batch_is_admitted_into_an_empty_queue(self) -> None:
        """A batch larger than the capacity cannot deadlock: an empty write side always takes one."""
        q = DoubleQueue(capacity_rows=5, capacity_bytes=10, spill_rows=5)
        assert q.push(batch(1, rows=50), timeout=0.1)

    def test_pull_timeout_returns_none(self) -> None:
        """A pull on an empty open queue returns None after its timeout."""
        q = DoubleQueue(capacity_rows=100, capacity_bytes=10**9, spill_rows=10)
        start = time.monotonic()
        assert q.pull(0.2) is None
        assert 0.15 <= time.monotonic() - start < 2

    def test_spill_threshold_waits_until_input_closes(self) -> None:
        """Below spill_rows consumers wait; closing the input releases what is queued, then end of stream."""
        q = DoubleQueue(capacity_rows=1000, capacity_bytes=10**9, spill_rows=100)
        q.push(batch(1), timeout=1)
        assert q.pull(0.1) is None
        q.close_input()
        assert q.pull(0.1) is not None
        with pytest.raises(QueueClosed):
            q.pull(0.1)

    def test_close_wakes_every_waiter(self) -> None:
        """close() wakes consumers blocked on an empty queue and a producer blocked on a full one."""
        empty = DoubleQueue(capacity_rows=10, capacity_bytes=10**9, spill_rows=10)
        full = DoubleQueue(capacity_rows=10, capacity_bytes=10**9, spill_rows=10)
        assert full.push(batch(0), timeout=1)
        outcomes: list[str] = []

        def consumer() -> None:
            try:
                empty.pull(None)  # no timeout: only close() can end this wait
            except QueueClosed:
                outcomes.append("consumer")

        def producer() -> None:
            outcomes.append("producer" if full.push(batch(1), timeout=None) is False else "pushed")

        threads = [threading.Thread(target=consumer) for _ in range(3)] + [threading.Thread(target=producer)]
        for t in threads:
            t.start()
        time.sleep(0.2)
        assert outcomes == []
        empty.close()
        full.close()
        for t in threads:
            t.join(2)
            assert not t.is_alive()
        assert sorted(outcomes) == ["consumer", "consumer", "consumer", "producer"]


class TestStorageAndExchanger:
    def test_stalled_destination_fails_alone(self) -> None:
        """A storage nobody drains fails after push_timeout_s; the other keeps receiving every batch."""
        conf = ExchangeConf(queue_rows=20, spill_rows=10, push_timeout_s=0.2, batch_rows=10)
        stalled, healthy = RAMStorage("stalled", conf), RAMStorage("healthy", conf)
        got: list[Parcel] = []
        t = threading.Thread(target=drain, args=(healthy.queue, got))
        t.start()
        sender = BufferedLineExchanger([stalled, healthy], batch_rows=10, stop=threading.Event())
        for i in range(50):
            sender.send([(i, j) for j in range(10)])
        sender.flush()
        healthy.close_input()
        t.join(5)
        assert stalled.failure is not None and "no batch" in stalled.failure
        assert sum(len(b) for b in got) == 500
        assert stalled.rows_dropped == 500 - stalled.queue.rows_in

    def test_sender_batches_small_reads_and_flushes_the_tail(self) -> None:
        """Rows sent in small pieces arrive as full batches plus one tail batch, in order."""
        conf = ExchangeConf(queue_rows=10**6, spill_rows=1)
        storage = RAMStorage("d", conf)
        sender = BufferedLineExchanger([storage], batch_rows=100, stop=threading.Event())
        for i in range(0, 1050, 7):
            sender.send([(j,) for j in range(i, min(i + 7, 1050))])
        sender.flush()
        storage.close_input()
        batches = list(BufferedLineExchanger.receive(storage, 0.05))
        assert [len(b) for b in batches] == [100] * 10 + [50]
        assert [r[0] for b in batches for r in rows_of(b.rows)] == list(range(1050))

    def test_sender_cuts_wide_rows_by_bytes_and_still_buffers_small_reads(self) -> None:
        """Rows of about 1 KB with batch_bytes 10 KB: batches of at most 10 rows, whether the reader
        sends them 3 at a time or 100 at once, every row once and in order."""
        conf = ExchangeConf(queue_rows=10**6, spill_rows=1)
        storage = RAMStorage("d", conf)
        sender = BufferedLineExchanger([storage], batch_rows=100, stop=threading.Event(), batch_bytes=10_000)
        rows = [(i, "x" * 1000) for i in range(130)]
        for i in range(0, 30, 3):
            sender.send(rows[i:i + 3])
        sender.send(rows[30:130])
        sender.flush()
        storage.close_input()
        batches = list(BufferedLineExchanger.receive(storage, 0.05))
        sizes = [len(b) for b in batches]
        assert max(sizes) <= 10 and min(sizes[:-1]) >= 5, sizes  # cut by bytes, yet 3-row reads buffered
        assert [r[0] for b in batches for r in rows_of(b.rows)] == list(range(130))

    def test_under_a_speed_limit_a_batch_holds_one_second_of_it(self) -> None:
        """A record limit of 40 rows/s cuts batches of 40 rows (a batch waits its whole cost at once: the
        default 8,192 would pace in steps of minutes), whether the reader sends rows or a whole Arrow batch;
        a byte limit cuts by bytes the same way; without a limit batch_rows holds."""
        def sizes(throttle: Throttle | None, arrow: bool) -> list[int]:
            storage = RAMStorage("d", ExchangeConf(queue_rows=10**6, spill_rows=1))
            sender = BufferedLineExchanger([storage], batch_rows=100, stop=threading.Event(), throttle=throttle)
            rows = [(i, "x" * 100) for i in range(130)]
            sender.send(Batch.of_rows(rows) if arrow else rows)
            sender.flush()
            storage.close_input()
            return [len(b) for b in BufferedLineExchanger.receive(storage, 0.05)]

        assert sizes(_Unpaced(record=40), arrow=False) == sizes(_Unpaced(record=40), arrow=True) == [40, 40, 40, 10]
        assert max(sizes(_Unpaced(byte=2_000), arrow=True)) <= 20
        assert sizes(None, arrow=True) == sizes(_Unpaced(record=10**9), arrow=False) == [100, 30]

    def test_under_a_speed_limit_an_encoded_batch_is_cut_to_one_second_and_stays_encoded(self) -> None:
        """A source's encoded batch (PostgreSQL's binary COPY rows, cut by bytes at 16 times batch_rows) is cut
        to one second of a record limit too, each piece still its bytes back to back; without a limit it goes
        whole, as its reader cut it."""
        payload = b"".join(b"row%03d;" % i for i in range(130))
        encoded = EncodedRows(Encoding("test.rows", ("text",)), payload, [7 * (i + 1) for i in range(130)],
                              lambda rows, i: (bytes(rows.span(i, i + 1)).decode(),))

        def received(throttle: Throttle | None) -> list[Batch]:
            storage = RAMStorage("d", ExchangeConf(queue_rows=10**6, spill_rows=1))
            sender = BufferedLineExchanger([storage], batch_rows=100, stop=threading.Event(), throttle=throttle)
            sender.send(Batch.of_encoded(encoded))
            storage.close_input()
            return [parcel.rows for parcel in BufferedLineExchanger.receive(storage, 0.05)]

        paced = received(_Unpaced(record=40))
        assert [len(b) for b in paced] == [40, 40, 40, 10]
        assert all(b.encoded is not None for b in paced)
        assert b"".join(bytes(b.encoded.span(0, len(b))) for b in paced if b.encoded is not None) == payload
        assert [b.encoded.row(0) for b in paced if b.encoded is not None] == [("row000;",), ("row040;",),
                                                                               ("row080;",), ("row120;",)]
        assert [len(b) for b in received(None)] == [130]

    def test_every_destination_failed_stops_the_reader(self) -> None:
        """When no storage accepts a batch any more, the sender raises instead of reading on."""
        conf = ExchangeConf()
        a = RAMStorage("a", conf)
        a.fail("broken")
        sender = BufferedLineExchanger([a], batch_rows=1, stop=threading.Event())
        with pytest.raises(TaskAborted):
            sender.send([(1,)])

    def test_receiver_distinguishes_abort_from_end_of_stream(self) -> None:
        """A failed storage makes its writers raise; a closed input ends their loop normally."""
        conf = ExchangeConf()
        aborted = RAMStorage("a", conf)
        aborted.fail("boom")
        with pytest.raises(TaskAborted, match="boom"):
            list(BufferedLineExchanger.receive(aborted, 0.05))
        ended = RAMStorage("b", conf)
        ended.close_input()
        assert list(BufferedLineExchanger.receive(ended, 0.05)) == []


class _Unpaced(Throttle):
    """The limits without the waits: what the exchanger cuts for them, seen at once."""

    def acquire(self, rows: int, nbytes: int, stop: threading.Event) -> float:
        return 0.0
