"""stockroom: a tiny stock ledger (items, movements, CSV, queries, reports)."""

__version__ = "0.1.0"
