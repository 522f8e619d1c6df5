"""The postgres store (PostgreSQL 15, and Greenplum through the same protocol) through psycopg 3: split
reads by key range or physical block range with COPY TO STDOUT, and COPY FROM STDIN loads with
append, truncate, upsert or an atomic staging-table swap.

:mod:`.options` holds the connection keys both roles share and the naming rules, :mod:`.connection`
the sessions and error classes.
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin
from wormhole.plugins.postgres.capabilities import CAPABILITIES

PLUGIN = Plugin(
    name="postgres",
    description="PostgreSQL/Greenplum tables: key or block range split reads; COPY loads with staging swap",
    capabilities=CAPABILITIES,
)
