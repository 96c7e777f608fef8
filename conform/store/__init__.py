"""conform's store: SQLAlchemy models, SQLite by default, any SQLAlchemy URL for a fleet."""

from .db import DEFAULT_DB, Store, database_url
from .models import SCHEMA_VERSION, CatalogEntry, Environment, Failure, Op, Result, Run, Timing

__all__ = ["DEFAULT_DB", "SCHEMA_VERSION", "Store", "database_url", "Environment", "Run", "Op", "CatalogEntry", "Result", "Failure", "Timing"]
