"""conform's store: SQLAlchemy models, SQLite by default, any SQLAlchemy URL for a fleet.

The only package of conform that knows SQL: `Store` (db.py) opens a database and writes to it,
`queries` reads it (plain rows for report, coverage, gate, expectations, declared, bench and the
site), `merging` copies one database into another, `timings` writes the timing pass's rows.
"""

from conform.store.db import DEFAULT_DB, Store, database_url
from conform.store.models import SCHEMA_VERSION, CatalogEntry, Environment, Failure, Op, Result, Run, Timing

__all__ = [
    "DEFAULT_DB",
    "SCHEMA_VERSION",
    "Store",
    "database_url",
    "Environment",
    "Run",
    "Op",
    "CatalogEntry",
    "Result",
    "Failure",
    "Timing",
]
