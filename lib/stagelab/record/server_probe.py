"""A quick look at a tracking server before any work, so an unreachable one fails in seconds
with what to check, not after MLflow's minutes of retries with a traceback."""

from __future__ import annotations

import urllib.error
import urllib.request

from ..core.errors import StoreError

# A tracking server answers /health in milliseconds; 5 s leaves room for a slow network and
# keeps the whole failure (Python start-up, about 3 s, plus the probe) well inside 15 s.
PROBE_TIMEOUT_S = 5


def check_reachable(uri: str) -> None:
    """Raise StoreError naming `uri` when nothing answers there over HTTP."""
    try:
        urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=PROBE_TIMEOUT_S).close()
    except urllib.error.HTTPError:
        return  # something answered (an auth wall, a proxy): MLflow reports what it says
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise StoreError(f"cannot reach the MLflow tracking server at {uri} ({reason}): check that "
                         f"`mlflow server` is running there and that MLFLOW_TRACKING_URI names its host "
                         f"and port (unset it to use the local SQLite store)") from None
