"""The team server: one `mlflow server` that several people's `stagelab run` log to.

Runs and metrics go to a PostgreSQL database (SQLite does not take concurrent writers from many
machines); artifacts are proxied (`--serve-artifacts`): clients upload through the server, which
writes them under one folder of its own, so nobody needs that folder mounted. It listens on
127.0.0.1 unless a host is given: the MLflow server has no authentication, so opening it to a
network is a choice to make on purpose.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..core.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 5000
# SQLAlchemy 2.1 (MLflow 3.17) reads postgresql:// with psycopg 3, not psycopg2.
POSTGRES_SCHEMES = ("postgresql://", "postgresql+psycopg://")
POSTGRES_DRIVER = "psycopg"


def check_backend(backend_uri: str) -> None:
    """A clear error before the server starts, instead of a traceback from inside MLflow."""
    if not backend_uri.startswith(POSTGRES_SCHEMES):
        raise ConfigError(f"the team server's store must be PostgreSQL (postgresql://user@host:port/db), "
                          f"not {backend_uri.split(':', 1)[0]}: SQLite does not take concurrent writers")
    if importlib.util.find_spec(POSTGRES_DRIVER) is None:
        raise ConfigError("the PostgreSQL driver is missing: pip install 'stagelab[server]' "
                          "(psycopg[binary]) into the environment that runs the server")


def server_command(backend_uri: str, artifacts: Path | str, host: str = DEFAULT_HOST,
                   port: int = DEFAULT_PORT) -> list[str]:
    """`mlflow server` on PostgreSQL with artifacts proxied into the folder `artifacts`."""
    check_backend(backend_uri)
    destination = Path(artifacts).expanduser().resolve()
    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_uri,
            "--serve-artifacts", "--artifacts-destination", destination.as_uri(),
            "--host", host, "--port", str(port)]
