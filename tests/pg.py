"""A throwaway PostgreSQL server for the tests, and a fresh database per test.

Where it comes from, in order:
- $CONFORM_TEST_POSTGRES_URL: a server someone else runs (a CI service container), given as a
  SQLAlchemy URL to a database the tests may create databases next to, e.g.
  postgresql+psycopg://postgres:postgres@localhost:5432/postgres;
- otherwise the tests start their own: initdb + pg_ctl from Debian's `postgresql` package (or any
  PostgreSQL on PATH) on a free localhost port, in a temporary folder, stopped at the end.
  PostgreSQL refuses to run as root, so under root the server runs as the `postgres` user.

Tests that need it skip, saying why, where there is no driver (psycopg) or no server.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

ENV_URL = "CONFORM_TEST_POSTGRES_URL"


def _bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0,
    )
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    """A private PostgreSQL cluster: initdb, start, stop, nothing left behind."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="conform-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user = None
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and there is no `postgres` user to run the server as") from None
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        kwargs = {}
        if self.user is not None:
            uid, gid = self.user.pw_uid, self.user.pw_gid
            kwargs["preexec_fn"] = lambda: (os.setgid(gid), os.setuid(uid))
            kwargs["env"] = {**os.environ, "HOME": str(self.root), "USER": "postgres"}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.root, **kwargs)
        if proc.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")

    def start(self) -> str:
        self._run("initdb", "-D", str(self.data), "-U", "conform", "-A", "trust", "--no-sync", "-E", "UTF8")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", options, "-w", "-t", "60", "start"
        )
        return f"postgresql+psycopg://conform@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """A SQLAlchemy URL to a running PostgreSQL server's maintenance database."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("PostgreSQL tests need the psycopg driver: pip install 'psycopg[binary]' (conform[postgres])")
    if os.environ.get(ENV_URL):
        yield os.environ[ENV_URL]
        return
    bindir = _bindir()
    if bindir is None:
        pytest.skip(f"no PostgreSQL server: install Debian's `postgresql` package (initdb, pg_ctl) or set ${ENV_URL}")
    try:
        server = _Server(bindir)
        url = server.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"could not start a PostgreSQL server from {bindir}: {e}")
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """A SQLAlchemy URL to a new, empty database on that server, dropped after the test."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(postgres_server)
    name = f"conform_test_{uuid.uuid4().hex[:12]}"
    conninfo = dict(host=url.host, port=url.port, user=url.username, password=url.password, dbname=url.database)
    with psycopg.connect(**{k: v for k, v in conninfo.items() if v is not None}, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield url.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(**{k: v for k, v in conninfo.items() if v is not None}, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
