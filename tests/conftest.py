# Shared fixtures. PostgreSQL (a throwaway server, or $CONFORM_TEST_POSTGRES_URL): see tests/pg.py.
from pg import postgres_server, postgres_url  # noqa: F401
