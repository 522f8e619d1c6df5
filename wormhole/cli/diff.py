"""``wormhole diff LEFT RIGHT``: two stores' rows compared to the key (:mod:`wormhole.verify.diff`);
``wormhole verify --task-id N``: a task's source compared with each destination (:mod:`wormhole.verify.task`).

Exit codes: 0 the sides hold the same rows, 1 they differ (as ``diff`` and ``cmp``), 203 a side could not be
read (or the comparison was stopped by SIGTERM or SIGINT), 204 a side or an option is wrong
(docs/manual/verify.md).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from wormhole.cli.common import TASK_ID, fail, global_options, quiet_on_a_terminal, task_and_runs, task_store
from wormhole.config import EngineConf
from wormhole.errors import InvalidTaskConfig, WormholeError
from wormhole.plugins.base import Split
from wormhole.recovery.chain import Chain
from wormhole.recovery.checkpoint import split_from_json
from wormhole.task_spec import TaskSpec
from wormhole.variables import resolve_text, values_for_run
from wormhole.verify.by_plan import OUTSIDE
from wormhole.verify.diff import SAMPLES, Comparison, Stopped, compare, parse_side
from wormhole.writer_manager import describe

EXIT_DIFFERENT = 1


def _comparing(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--samples`` and ``--readers``, as diff and verify both take them."""
    command = click.option("--readers", type=click.IntRange(1, 64), default=4, show_default=True,
                           help="Splits read at once on each side.")(command)
    return click.option("--samples", type=click.IntRange(0, 10_000), default=SAMPLES, show_default=True,
                        help="Differences shown with their values (per destination, for verify).")(command)


class _Signals:
    """SIGTERM and SIGINT while a comparison reads: its reads stop at their next batch (``stop``), and the
    command ends saying which signal stopped it (exit 203), without a traceback or a result."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.name: str | None = None

    def _trip(self, name: str) -> None:
        self.name = name
        self.stop.set()

    def interrupted(self, what: str) -> WormholeError | None:
        """The error to end with, once a signal stopped the reads (None: none did)."""
        if self.name is None:
            return None
        return WormholeError(f"interrupted by {self.name}: {what}")


@contextmanager
def _on_signals() -> Iterator[_Signals]:
    """:class:`_Signals` installed for SIGTERM and SIGINT (the previous handlers restored after)."""
    signals = _Signals()

    def handler(signum: int, _frame: Any) -> None:
        # As the runner's handler: the main thread may hold a lock an Event or the log needs; a thread waits.
        threading.Thread(target=signals._trip, args=(signal.Signals(signum).name,), daemon=True,
                         name="signal-stop").start()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield signals
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _side(text: str, label: str) -> Any:
    """A side as given: a JSON file's path, or the JSON itself (it starts with ``{``)."""
    if text.lstrip().startswith("{"):
        source = "the text given"
        raw = text
    else:
        source = text
        try:
            raw = Path(text).read_text()
        except OSError as exc:
            raise InvalidTaskConfig([f"{label}: cannot read {text}: {exc.strerror or exc}"]) from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidTaskConfig([f"{label}: {source} is not JSON: {exc}"]) from None


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


@click.command("diff")
@click.argument("left")
@click.argument("right")
@click.option("--key", metavar="COLUMNS", help="The key columns, comma-separated (default: a table side's primary "
                                               "key; '' or none found: rows compare as a multiset, each missing "
                                               "or extra).")
@click.option("--ignore", metavar="COLUMNS", help="Columns left out of the comparison, comma-separated.")
@_comparing
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (docs/manual/verify.md).")
@global_options
@click.pass_context
def diff(ctx: click.Context, left: str, right: str, key: str | None, ignore: str | None, samples: int,
         readers: int, as_json: bool) -> None:
    """Compare the rows of two stores, each given as a source spec ({"plugin": ..., "params": ...}, a JSON
    file or the JSON itself): every key missing, extra, different or duplicated, the first ones shown with
    both values. Exit 0 when equal, 1 when they differ."""
    quiet_on_a_terminal(ctx)
    try:
        sides = parse_side(_side(left, "left"), "left"), parse_side(_side(right, "right"), "right")
        batch_rows = EngineConf.load(ctx.obj.conf_dir).exchange.batch_rows
    except WormholeError as exc:
        fail(exc)
    with _on_signals() as signals:
        try:
            found = compare(*sides, key=None if key is None else _names(key), ignore=_names(ignore),
                            readers=readers, samples=samples, batch_rows=batch_rows, stop=signals.stop)
        except Exception as exc:  # a side's store: unreachable, a missing table, rows it cannot decode
            stopped = signals.interrupted("the comparison stopped before it ended; nothing was compared")
            if stopped is not None:
                fail(stopped)  # exit 203
            fail(exc if isinstance(exc, InvalidTaskConfig) else WormholeError(f"cannot compare: {describe(exc)}"))
    click.echo(json.dumps(found.to_dict(), indent=2, default=str) if as_json else _text(found))
    sys.exit(0 if found.equal else EXIT_DIFFERENT)


def _text(found: Comparison) -> str:
    shown = found.to_dict()
    lines = [f"left:   {shown['left']['source']}: {shown['left']['rows']} rows (digest {shown['left']['digest']})",
             f"right:  {shown['right']['source']}: {shown['right']['rows']} rows (digest {shown['right']['digest']})",
             f"key:    {', '.join(shown['key']) if shown['key'] else '(none: rows compared as a multiset)'}",
             f"compared: {', '.join(shown['columns'])}"]
    for side in ("only_left", "only_right"):
        if side in shown:
            lines.append(f"not compared ({side.replace('_', ' ')}): {', '.join(shown[side])}")
    splits = shown.get("splits")
    if splits is not None:
        lines.append(_splits_line(splits))
    window = shown.get("window")
    if window is not None:
        lines.append(_window_line(window))
    if found.equal:
        return "\n".join([*lines, "equal"])
    counts = ", ".join(f"{n} {kind}" for kind, n in shown["differences"].items() if n)
    lines.append(f"different: {counts}")
    for sample in shown["samples"]:
        key = ", ".join(f"{k}={v}" for k, v in (sample["key"] or {}).items())
        head = f"  {sample['kind']}" + (f" {key}" if key else "")
        if sample["kind"] == "different":
            lines.append(head + ": " + "; ".join(
                f"{c}: {sample['left'][0][c]!r} -> {sample['right'][0][c]!r}" for c in sample["columns"]))
        else:
            lines.append(head + f": left {sample['left'] or '-'}, right {sample['right'] or '-'}")
    return "\n".join(lines)


def _splits_line(splits: dict[str, Any]) -> str:
    """Which splits of the task's last plan hold differing keys, and what differs outside all of them."""
    differing = [k for k in splits["differing"] if k and k != OUTSIDE]
    outside = splits.get("outside") or {}
    beyond = f" (and {outside['rows']} row(s) outside them)" if outside.get("rows") else ""
    if not splits["differing"]:
        return f"splits: {splits['read']} of the task's last plan{beyond}, each equal"
    named = f": {', '.join(differing[:10])}" + (" ..." if len(differing) > 10 else "") if differing else ""
    extra = " (and keys of no split: extra)" if "" in splits["differing"] else ""
    line = f"splits: {splits['read']} of the task's last plan{beyond}, {len(differing)} differ{named}{extra}"
    if OUTSIDE in splits["differing"]:
        counts = ", ".join(f"{n} {kind}" for kind, n in splits["differing"][OUTSIDE].items())
        sample = outside.get("sample") or {}
        key = ", ".join(f"{k}={v}" for k, v in (sample.get("key") or {}).items())
        line += (f"\n{OUTSIDE}: {counts} (rows the source holds now that no split of the plan reads"
                 + (f"; e.g. {sample['kind']} {key}" if key else "") + ")")
    return line


def _window_line(window: dict[str, Any]) -> str:
    """The range of an incremental task's cursor column compared, and the keys that moved past it since."""
    low = "the first row" if window["from"] is None else \
        f"{window['from']} ({'inclusive' if window['from_inclusive'] else 'exclusive'})"
    high = f"{window['to']} ({'inclusive' if window['to_inclusive'] else 'exclusive'})"
    runs = ", ".join(str(r) for r in window["runs"])
    line = f"window: {window['column']} from {low} to {high}, delivered by run(s) {runs}"
    if window.get("moved_later"):
        line += (f"; {window['moved_later']} key(s) it holds have moved past the window in the source since "
                 "(changed after their window was copied: the next run takes them), not counted as extra")
    return line


def _deliveries(ctx: click.Context, runs: list[Any]) -> Callable[[str, str, str | None], Any]:
    """What each run of an incremental task committed, as :func:`wormhole.verify.window.delivered` reads it."""
    from wormhole.verify.window import delivered

    def of(recorded: str, name: str, scope: str | None) -> Any:
        store = task_store(ctx)
        try:
            return delivered(store, [r.id for r in runs], recorded, label=name, scope=scope)
        finally:
            store.close()

    return of


def _last_plan(ctx: click.Context, run_id: int | None) -> list[Split] | None:
    """The splits the task's last run read (the plan of the run it continued, if it resumed one); None when no
    run recorded a plan (never ran, or its checkpoints were cleaned)."""
    if run_id is None:
        return None
    store = task_store(ctx)
    try:
        rows = Chain.read(store, run_id).plan().rows
    finally:
        store.close()
    return [split_from_json(r.payload) for r in rows if r.payload is not None] or None


@click.command("verify")
@click.option("--task-id", type=TASK_ID, required=True, help="The task whose copies to check.")
@click.option("--destination", "only", metavar="ID", help="Check this destination only.")
@click.option("--key", metavar="COLUMNS", help="The key columns, comma-separated (default: the source table's "
                                               "primary key).")
@_comparing
@click.option("--repair", is_flag=True, help="Repair each destination that differs (keyed by its primary key: "
                                             "delete its extra keys, write the source's rows of the missing and "
                                             "different ones over them by a repair task's upsert; keyed otherwise: "
                                             "delete what it holds of the differing keys, then write them again), "
                                             "then compare it again.")
@click.option("--json", "as_json", is_flag=True, help="Print each destination's comparison as JSON.")
@global_options
@click.pass_context
def verify(ctx: click.Context, task_id: int, only: str | None, key: str | None, samples: int, readers: int,
           repair: bool, as_json: bool) -> None:
    """Compare a task's source, as it is now, with each of its destinations read back (each table with its
    target, for a database task; an incremental task's within the windows its runs delivered to each): every
    key missing, extra, different or duplicated. Exit 0 when every destination equals the source (after
    --repair: once repaired), 1 when one differs or was not compared."""
    from wormhole import log
    from wormhole.verify.task import compared

    quiet_on_a_terminal(ctx)
    record, runs = task_and_runs(ctx, task_id)
    last = runs[-1] if runs else None
    with _on_signals() as signals:
        try:
            # The values the task's last run used: its destinations are where that run wrote.
            resolved = resolve_text(record.spec, values_for_run(record.params, last.variables if last else None))
            mapping = resolved.check()
            spec = TaskSpec.from_mapping(mapping)
            conf = EngineConf.load(ctx.obj.conf_dir)
            logger = log.get_logger(task_id=task_id)
            pairs = compared(spec, mapping["source"], conf, logger, only=only,
                             key=None if key is None else _names(key), samples=samples, readers=readers,
                             plan=_last_plan(ctx, last.id if last else None), deliveries=_deliveries(ctx, runs),
                             stop=signals.stop)
            repairs = _repaired(ctx, pairs, mapping, logger, readers, samples, task_id, signals) if repair else {}
        except Exception as exc:
            stopped = signals.interrupted("the comparison stopped before it ended; nothing is reported (a repair "
                                          "task that ran is recorded in the task database)" if repair else
                                          "the comparison stopped before it ended; nothing is reported")
            if stopped is not None:
                fail(stopped)
            if isinstance(exc, WormholeError):
                fail(exc)
            fail(WormholeError(f"cannot compare: {describe(exc)}"))  # a side's store: unreachable, a missing
            # table, rows it cannot decode
    _show(pairs, repairs, as_json)
    # A destination not compared (an incremental task's that was delivered nothing) is no pass: exit 1.
    equal = [repairs[pair.name].equal if pair.name in repairs else c is not None and c.equal for pair, c in pairs]
    sys.exit(0 if all(equal) else EXIT_DIFFERENT)


def _show(pairs: list[tuple[Any, Comparison | None]], repairs: dict[str, Any], as_json: bool) -> None:
    """Each destination's comparison (and repair), or why it was not compared."""
    skipped = {pair.name: pair.window.reason for pair, c in pairs if c is None and pair.window is not None}
    if as_json:
        shown: dict[str, Any] = {pair.name: {"equal": False, "compared": False, "reason": skipped[pair.name]}
                                 if c is None else {**c.to_dict(), **({"repair": repairs[pair.name].to_dict()}
                                                                       if pair.name in repairs else {})}
                                 for pair, c in pairs}
        click.echo(json.dumps(shown, indent=2, default=str))
    else:
        click.echo("\n\n".join(f"[{pair.name}]\nnot compared: {skipped[pair.name]}" if c is None else
                                 f"[{pair.name}]\n{_text(c)}" + (_repair_text(repairs[pair.name])
                                                                  if pair.name in repairs else "")
                                 for pair, c in pairs))


def _repaired(ctx: click.Context, pairs: list[tuple[Any, Comparison | None]], mapping: dict[str, Any], logger: Any,
              readers: int, samples: int, task_id: int, signals: _Signals | None = None) -> dict[str, Any]:
    """``--repair``: each pair that differs repaired (:mod:`wormhole.verify.repair`), then compared again."""
    from wormhole.verify.repair import Repair, repair
    from wormhole.verify.task import compare_pair

    out = {}
    for pair, found in pairs:
        if found is None or found.equal:
            continue
        try:
            done = repair(found, pair.dest, pair.dest.params, pair.source_spec, mapping,
                          _repair_runner(ctx, task_id, signals), logger, readers=readers, whole=pair.whole)
        except Stopped:
            raise
        except WormholeError as exc:  # this destination's repair could not be made or run: the others go on
            done = Repair(None, f"the repair could not run: {exc}")
        if done.method is not None and done.reason is None:
            again = compare_pair(pair, key=found.columns.key_left or None, samples=samples, readers=readers,
                                 stop=signals.stop if signals is not None else None)
            done.equal = again.equal
            if not again.equal:
                done.reason = f"still differs after the repair: {dict(again.counts)}"
        else:
            done.equal = False
        logger.info("verify.repaired", destination=pair.name, method=done.method, deleted=done.deleted,
                    written=done.written, equal=done.equal, reason=done.reason)
        out[pair.name] = done
    return out


def _repair_runner(ctx: click.Context, task_id: int,
                   signals: _Signals | None = None) -> Callable[[dict[str, Any], str], tuple[int, int, Any]]:
    """Record a repair task (named after the task it repairs) and run it now, as ``wormhole run FILE`` does. The
    run takes SIGTERM and SIGINT while it runs (it rolls back, ``interrupted``): verify then stops too."""
    from wormhole.cli.common import submit_record
    from wormhole.cli.run import run_task

    def run(spec_mapping: dict[str, Any], name: str) -> tuple[int, int, Any]:
        text = json.dumps(spec_mapping, ensure_ascii=False)
        checked = TaskSpec.from_mapping(spec_mapping)
        store = task_store(ctx)
        try:
            repair_id = submit_record(store, f"task {task_id}: {name}", text, checked, now=True)
        finally:
            store.close()
        code = run_task(repair_id, ctx.obj.task_db, ctx.obj.conf_dir)
        store = task_store(ctx)
        try:
            record = store.get(repair_id)
        finally:
            store.close()
        result = json.loads(record.result) if record is not None and record.result else None
        if signals is not None and isinstance(result, dict) and result.get("interrupted"):
            error = str(result.get("error") or "")
            signals._trip(error.removeprefix("interrupted by ") if error.startswith("interrupted by ") else "a signal")
            raise Stopped(f"repair task {repair_id} was interrupted")
        return repair_id, code, result

    return run


def _repair_text(done: Any) -> str:
    if done.method is None:
        return f"\nrepair: not repaired: {done.reason}"
    what = (f"{done.deleted} row(s) deleted, {done.written} written" if done.method == "keys"
            else f"written again whole ({done.written} rows)")
    tasks = ", ".join(str(t) for t in done.tasks)
    after = "equal now" if done.equal else f"NOT equal: {done.reason}"
    return f"\nrepair: {what} by repair task(s) {tasks or '-'}; {after}"
