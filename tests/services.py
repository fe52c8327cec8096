"""Real services for the slow tests: a PostgreSQL server of its own and MLflow servers, on loopback.

A tool the tests need but the machine lacks is a skip with the reason on a developer's machine
and a failure in CI (CI=true), where .ci/run installs it: a missing package must not pass as green.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

# Seconds a server gets to come up: MLflow's first start on a fresh database runs every migration.
STARTUP_S = 180
LOOPBACK = "127.0.0.1"


def missing(what: str, how: str):
    """Fail in CI, skip elsewhere, with how to install it either way."""
    message = f"{what} is not installed ({how})"
    if os.environ.get("CI"):
        pytest.fail(message + "; .ci/run should have installed it")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def postgres_bin() -> Path:
    """The server binaries of Debian's postgresql package (initdb and pg_ctl are not on PATH there)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        missing("PostgreSQL", "apt-get install postgresql")
    return Path(initdb).parent


def _as_owner(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the postgres user the package made."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def postgres(database: str = "stagelab"):
    """A fresh PostgreSQL cluster on a free loopback port; yields its SQLAlchemy URI."""
    bin_dir, port = postgres_bin(), free_port()
    data = Path(tempfile.mkdtemp(prefix="stagelab-pg-"))  # not under pytest's root-only tmp folder
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    user = "stagelab"
    run = lambda *cmd: subprocess.run(_as_owner([str(bin_dir / cmd[0]), *cmd[1:]]), check=True,
                                      capture_output=True, text=True)
    run("initdb", "-D", str(data / "db"), "-U", user, "--auth=trust", "-E", "UTF8")
    run("pg_ctl", "-D", str(data / "db"), "-l", str(data / "server.log"), "-w", "-t", str(STARTUP_S),
        "-o", f"-p {port} -k {data} -c listen_addresses={LOOPBACK}", "start")
    try:
        run("createdb", "-h", LOOPBACK, "-p", str(port), "-U", user, database)
        yield f"postgresql://{user}@{LOOPBACK}:{port}/{database}"
    finally:
        run("pg_ctl", "-D", str(data / "db"), "-m", "fast", "-w", "stop")
        shutil.rmtree(data, ignore_errors=True)


def _healthy(url: str, path: str = "/health") -> bool:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


@contextmanager
def http_server(command: list[str], url: str, log: Path, env: dict | None = None, health: str = "/health"):
    """Start `command` (an MLflow server; a Jupyter server with health="/api") in its own process group;
    yield once `url` answers its health path."""
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + STARTUP_S
        while not _healthy(url, health):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not come up at {url}:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield proc
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (its workers too), SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # it had already exited
            return
        try:
            proc.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            continue
