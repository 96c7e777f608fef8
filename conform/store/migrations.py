"""Recorded schema migrations.

A fresh database is created at `SCHEMA_VERSION` directly. An older database is brought up to
date by applying, in order, every step whose version is above the database's; each applied step
is recorded in the `conform_schema` table. To change the schema: edit models.py, bump
SCHEMA_VERSION, and append a `(version, description, function(connection))` step here.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine

from .models import SCHEMA_VERSION, Base, SchemaMigration

# (version, description, upgrade(conn)); version 1 is the initial schema, made by create_all.
MIGRATIONS: list[tuple[int, str, callable]] = []


def create_all(engine: Engine) -> None:
    with engine.begin() as conn:
        Base.metadata.create_all(conn)
        conn.execute(SchemaMigration.__table__.insert(), [{"version": SCHEMA_VERSION, "description": "initial schema"}])


def upgrade(engine: Engine, from_version: int) -> None:
    with engine.begin() as conn:
        for version, description, step in MIGRATIONS:
            if version > from_version:
                step(conn)
                conn.execute(SchemaMigration.__table__.insert(), [{"version": version, "description": description}])
        # tables added since (new tables need no data migration)
        Base.metadata.create_all(conn)
