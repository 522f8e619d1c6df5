"""What a source's Spark read carries as exact text, asked of the source when a Spark-mode run prepares it.

The plan (:mod:`wormhole.planning.methods`) cannot see the frame, so the facts stage
(:func:`wormhole.source_facts.prepare_source`) asks the source which columns its Spark read will carry
as exact text (:func:`source_exact_text`), and planning decides from the answer. No pyspark import here:
the store's Spark module is loaded only when the source has one.
"""

from __future__ import annotations

import importlib
from typing import Any

from wormhole.plugins import registry
from wormhole.plugins.base import Schema


def source_exact_text(plugin: str, options: Any, schema: Schema | None) -> frozenset[str] | None:
    """The columns the source's Spark read carries as exact text: none for a source read by its row
    reader per split; what its native read module's ``exact_text(options, schema)`` says (it may ask the
    source); None when the module does not say."""
    role = registry.get(plugin).source
    if role is None or role.spark_read is None:
        return frozenset()
    if schema is None:
        return None
    module = importlib.import_module(role.spark_read.partition(":")[0])
    probe = getattr(module, "exact_text", None)
    return None if probe is None else frozenset(probe(options, schema))
