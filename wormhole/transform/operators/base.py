"""What every operator kind is: its parsed and bound forms, and the contract of its class.

One class per kind (:mod:`.filter`, :mod:`.project`, ...) holds all of the kind: parse (syntax),
bind (types, against the schema before it), its Arrow form (a :data:`~wormhole.transform.frame.Step`),
its SQL push-down form (:class:`SourcePart`, or :class:`~wormhole.transform.sqlgen.NotPushable` with
the reason) and its Spark form (built from a :class:`SparkKit`, so only ``wormhole/spark`` imports
pyspark). Adding an operator is one class and one line of the registry (``OPERATORS``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from wormhole.options import Problems, join_path
from wormhole.plugins.base import Schema
from wormhole.transform.check import Typed, check
from wormhole.transform.expr import parse
from wormhole.transform.frame import Step
from wormhole.transform.sqlgen import Dialect, NotPushable, SqlText
from wormhole.transform.tree import Expr, ExprError


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One operator as the task wrote it, with its expressions parsed."""

    operator: Operator
    raw: Any
    path: str
    """Where it is in the task (``destinations[1].transforms[0].filter``): every message names it."""
    op_id: str
    exprs: tuple[tuple[str, Expr], ...] = ()
    """``filter``: ("", predicate); ``derive``: (name, expression) per new column."""

    @property
    def kind(self) -> str:
        return self.operator.kind


def op_id(scope: str, position: int, raw: Any) -> str:
    text = json.dumps({"scope": scope, "position": position, "op": raw}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class BoundOp:
    """An operator checked against its input schema: what it reads, and the schema it produces."""

    spec: OpSpec
    input: Schema
    output: Schema
    typed: tuple[Typed, ...] = ()
    """Per expression of ``spec.exprs``: its checked types."""
    detail: dict[str, Any] = field(default_factory=dict)
    """Resolved parameters: ``keep`` (project), ``names`` (rename), ``casts``, ``mask`` settings."""

    @property
    def kind(self) -> str:
        """Its key in the task (``filter``, ``project``, ...)."""
        return self.spec.kind

    @property
    def id(self) -> str:
        """Stable across runs of the task: logs, metrics and checkpoints name it."""
        return self.spec.op_id

    def describe(self) -> dict[str, str]:
        """How the plan and the result name it."""
        return {"id": self.id, "kind": self.kind, "path": self.spec.path}


@dataclass(frozen=True, slots=True)
class SourcePart:
    """An operator's share of a source query (push-down): the columns it keeps, or its condition."""

    keep: tuple[int, ...] | None = None
    """Indices into the columns before it (a projection)."""
    where: SqlText | None = None


class SparkKit(Protocol):
    """What an operator's Spark form builds with, for one operator on one DataFrame (given by
    :mod:`wormhole.spark.transforms`); Columns and DataFrames are pyspark's, typed ``Any`` here."""

    @property
    def F(self) -> Any:
        """``pyspark.sql.functions``."""

    def expr(self, e: Expr, typed: Typed) -> Any:
        """The Column of a checked expression over the operator's input."""

    def value(self, name: str) -> Any:
        """Input column ``name`` in its logical type (a column the frame carries as text, converted)."""

    def result(self, name: str, e: Expr, typed: Typed) -> Any:
        """The Column a derived column ``name`` holds: the expression's value in its type's Spark type, or
        as its exact text where Spark's type would not hold it (an integer beyond 64 bits)."""

    def ref(self, name: str) -> Any:
        """Column ``name`` as the frame carries it."""

    def type(self, kind: str) -> Any:
        """The Spark DataType of a wormhole type."""


class Operator:
    """One operator kind; the registry holds one instance of each class."""

    kind: ClassVar[str]
    commutes: ClassVar[bool] = False
    """Adjacent operators of kinds that commute form one ordering group (a placement may take any subset)."""
    free_in_source: ClassVar[bool] = False
    """It only narrows what the source sends: pushed as soon as it may be, without measuring it."""

    def parse(self, body: Any, path: str, oid: str, problems: Problems) -> OpSpec | None:
        raise NotImplementedError

    def bind(self, spec: OpSpec, schema: Schema, problems: Problems) -> BoundOp | None:
        raise NotImplementedError

    def arrow(self, op: BoundOp) -> Step:
        """Its batch function over Arrow columns (local mode's chains)."""
        raise NotImplementedError

    def target(self, op: BoundOp) -> str:
        """Where its batch function computes: ``arrow``, or ``python`` (an expression with no exact Arrow
        form runs in its Python form over the columns it reads; ``wormhole plan`` shows it)."""
        return "arrow"

    def sql(self, op: BoundOp, dialect: Dialect) -> SourcePart:
        """Its share of the source query; NotPushable (the reason) when it runs in wormhole."""
        raise NotPushable(f"a {self.kind} runs in wormhole")

    def spark(self, op: BoundOp, frame: Any, kit: SparkKit) -> Any:
        """The DataFrame with this operator applied."""
        raise NotImplementedError


# -- helpers the kinds share ------------------------------------------------------------------


def parse_expr(text: Any, path: str, problems: Problems) -> Expr | None:
    try:
        return parse(text)
    except ExprError as exc:
        problems.add(path, str(exc))
        return None


def is_text(value: Any) -> bool:
    """A JSON string a name or a type can be: checked before it is looked up (a list is unhashable)."""
    return isinstance(value, str) and bool(value) and "\x00" not in value


def names_of(value: Any, path: str, problems: Problems) -> list[str] | None:
    if not isinstance(value, list) or not value or not all(is_text(v) for v in value):
        problems.add(path, "must be a non-empty list of column names")
        return None
    return list(value)


def object_body(body: Any, path: str, problems: Problems) -> bool:
    if not isinstance(body, dict) or not body:
        problems.add(path, "must be a non-empty object")
        return False
    return True


def known_columns(names: list[str], schema: Schema, path: str, problems: Problems) -> bool:
    known = set(schema.names)
    ok = True
    for name in names:
        if name not in known:
            problems.add(path, f"unknown column {name!r} (columns: {', '.join(schema.names[:20])})")
            ok = False
    return ok


def check_exprs(spec: OpSpec, schema: Schema, problems: Problems,
                judge: Callable[[str], str | None]) -> tuple[Typed, ...] | None:
    """Each of ``spec.exprs`` typed against ``schema``; ``judge(type)`` names what is wrong with a
    well-typed result (or None). None when anything is wrong, every problem in ``problems``."""
    types = {c.name: c.type for c in schema.columns}
    typed: list[Typed] = []
    ok = True
    for name, e in spec.exprs:
        t = check(e, types)
        where = join_path(spec.path, name) if name else spec.path
        for p in t.problems:
            problems.add(where, p)
        wrong = None if t.problems else judge(t.type)
        if wrong is not None:
            problems.add(where, wrong)
        ok = ok and not t.problems and wrong is None
        typed.append(t)
    return tuple(typed) if ok else None
