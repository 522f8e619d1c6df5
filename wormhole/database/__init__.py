"""Whole databases in one task: a source that names many tables (``source.params.tables``), each read once
and fanned out to its own target in every destination (docs/manual/databases.md).

- :mod:`.model`: what a table is (:class:`~.model.TableDef`), the table patterns and the target templates;
- the stores' catalogs list and describe tables (``SourceRole.catalog``), their dialects render the DDL;
- :mod:`.run`: the run of a database task, one table run per table, results per (table, destination).
"""
