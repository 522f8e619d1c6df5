"""Importers: turn other tools' job files into wormhole task documents (``wormhole import ...``).

Each importer is pure functions over dicts: it never reads files, connects or writes anything, so the
CLI decides where the job comes from and where the task goes, and validates the result with the task
model like any other spec.
"""
