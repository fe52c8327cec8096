"""Headless Chromium (Debian's package) driven through playwright, and screenshots CI keeps.

playwright's own browser download cannot work here, so it launches the system's Chromium. The
flags keep a headless Chromium off the network (a closed network refuses its background
connections) and out of any profile but a fresh one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from services import missing

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 2000, "height": 1000}  # the runs table's columns all on screen beside the assistant panel
ROOT = Path(__file__).resolve().parents[1]


def screenshot_dir() -> Path:
    """$STAGELAB_TEST_ARTIFACTS, else test-artifacts/ui in the checkout (git-ignored; CI keeps it)."""
    folder = Path(os.environ.get("STAGELAB_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        missing("Chromium", "apt-get install chromium")
    return path


@contextmanager
def browser_page():
    """A page in a fresh headless Chromium profile; closed (with the browser) on exit."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright", "pip install -e '.[dev]'")
    executable = chromium_path()
    profile = tempfile.mkdtemp(prefix="stagelab-chromium-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(profile, executable_path=executable, headless=True,
                                                           args=CHROMIUM_FLAGS, viewport=VIEWPORT)
            try:
                yield context.new_page()
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
