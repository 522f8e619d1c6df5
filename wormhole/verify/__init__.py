"""Verified copies (issue 39): what proves that a destination holds the rows the source gave.

:mod:`wormhole.verify.checksum` is the building block: an order-independent checksum (:class:`Digest`) of
rows over Arrow record batches, computed column by column over a canonical form of each value by logical
type, so that the same rows read back from any store compare equal. :mod:`wormhole.verify.diff` compares
two stores' rows to the key with it (``wormhole diff``), :mod:`wormhole.verify.task` a task's source with each
of its destinations read back (``wormhole verify --task-id``).
"""

from __future__ import annotations

from wormhole.verify.checksum import CHECKSUM_VERSION, Digest, JsonNull, digest, row_hashes

__all__ = ["CHECKSUM_VERSION", "Digest", "JsonNull", "digest", "row_hashes"]
