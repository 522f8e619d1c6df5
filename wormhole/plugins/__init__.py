"""Stores (plugins): contracts in ``base``, lookup in ``registry``, one package per store."""
