"""A real PostgreSQL server for tests and benchmarks: Debian's binaries (installed by
scripts/setup-test-deps.sh), a throw-away cluster on a loopback port, trust authentication,
stopped with its process group. As root the server runs as the `postgres` user (it refuses
root)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tunebench.deploy.local import free_port
from tunebench.processes import ManagedProcess

USER = "tunebench"
DATABASE = "tunebench"


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    assert found, "PostgreSQL's server binaries are missing: run scripts/setup-test-deps.sh"
    return Path(found[-1])


def _as_server_user() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running server; yields the URL of an empty database `tunebench`."""
    binaries = _bin_dir()
    home = Path(tempfile.mkdtemp(prefix="tunebench-pg-"))
    data, sockets = home / "data", home / "sockets"
    sockets.mkdir()
    prefix = _as_server_user()
    if prefix:
        shutil.chown(home, "postgres")
        shutil.chown(sockets, "postgres")
    subprocess.run(
        [
            *prefix,
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            "--auth=trust",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    server = ManagedProcess(
        [
            *prefix,
            str(binaries / "postgres"),
            "-D",
            str(data),
            "-p",
            str(port),
            "-h",
            "127.0.0.1",
            "-k",
            str(sockets),
            "-c",
            "max_connections=100",
            "-c",
            "fsync=off",  # a throw-away cluster: durability is not under test
        ],
        log_path=Path(tempfile.gettempdir()) / f"tunebench-pg-{port}.log",
    )
    try:
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            try:
                connection = psycopg.connect(
                    host="127.0.0.1",
                    port=port,
                    user=USER,
                    dbname="postgres",
                    connect_timeout=2,
                    autocommit=True,
                )
                break
            except psycopg.OperationalError:
                assert server.poll() is None, "postgres exited at start"
                assert time.monotonic() < deadline, "postgres did not accept connections"
                time.sleep(0.2)
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {DATABASE}")
        connection.close()
        yield f"postgresql://{USER}@127.0.0.1:{port}/{DATABASE}"
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
