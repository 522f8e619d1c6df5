"""The store contract (tests/contract/suite.py) over every store that runs without Spark."""

from __future__ import annotations

from tests.contract.suite import StoreContract


class TestStoreContract(StoreContract):
    """Every case once per store of the ``store`` fixture (tests/contract/conftest.py)."""
