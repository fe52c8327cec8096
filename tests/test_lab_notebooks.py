"""Stage notebooks in JupyterLab (`stagelab lab`): they open on the project's kernel, unmodified, and a
save without edits leaves the committed file as it was.

JupyterLab writes the running kernel's language_info (its Python version included) into an opened
notebook and marks it modified where the file's differs; lab_contents fills it on reading and trims
it on writing. The browser test opens a copy of a committed notebook in headless Chromium.
"""

import asyncio
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from browser import browser_page, screenshot_dir
from services import LOOPBACK, free_port, http_server
from stagelab.lab_contents import (COMMITTED_LANGUAGE_INFO, PROJECT_KERNELSPEC, StageNotebookContents,
                                   install_kernelspec, kernel_language_info, lab_command)
from stagelab.notebooks import NOTEBOOK_METADATA, notebooks_dir

NOTEBOOK = "s7_pingpong.ipynb"
TOKEN = "stagelab-test"
SETTLE_S = 12  # the kernel starts and reports its language_info; the dirty mark, if any, comes with it


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_committed_notebooks_name_the_project_kernel_and_no_python_version():
    for path in sorted(notebooks_dir().glob("*.ipynb")):
        metadata = json.loads(path.read_text())["metadata"]
        assert metadata == NOTEBOOK_METADATA, path
    assert "version" not in COMMITTED_LANGUAGE_INFO and "version" in kernel_language_info()


def test_the_contents_manager_fills_the_kernels_language_info_and_saves_the_committed_file(tmp_path):
    shutil.copy(notebooks_dir() / NOTEBOOK, tmp_path / NOTEBOOK)
    other = {"cells": [], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"},
                                       "language_info": {"name": "python", "version": "3.0"}},
             "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "other.ipynb").write_text(json.dumps(other))
    committed = _digest(tmp_path / NOTEBOOK)
    contents = StageNotebookContents(root_dir=str(tmp_path))

    async def open_and_save(name):
        model = await contents.get(name)
        await contents.save({"type": "notebook", "format": "json", "content": model["content"]}, name)
        return model
    opened = asyncio.run(open_and_save(NOTEBOOK))
    assert opened["content"]["metadata"]["language_info"] == kernel_language_info()
    assert opened["content"]["metadata"]["kernelspec"]["name"] == PROJECT_KERNELSPEC["name"]
    assert _digest(tmp_path / NOTEBOOK) == committed
    theirs = asyncio.run(open_and_save("other.ipynb"))  # not a stage notebook: as the default manager keeps it
    assert theirs["content"]["metadata"]["language_info"] == other["metadata"]["language_info"]
    assert json.loads((tmp_path / "other.ipynb").read_text())["metadata"] == other["metadata"]


@pytest.mark.slow
def test_a_stage_notebook_opens_unmodified_on_the_project_kernel(tmp_path):
    pytest.importorskip("jupyterlab")
    shutil.copy(notebooks_dir() / NOTEBOOK, tmp_path / NOTEBOOK)
    committed = _digest(tmp_path / NOTEBOOK)
    install_kernelspec()
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "run")}
    command = lab_command(tmp_path, port=port, open_browser=False) + [f"--IdentityProvider.token={TOKEN}"]
    with http_server(command, url, tmp_path / "lab.log", env=env, health="/api"), browser_page() as page:
        page.goto(f"{url}/lab/tree/{NOTEBOOK}?token={TOKEN}")
        page.wait_for_selector(".jp-NotebookPanel", timeout=60_000)
        page.wait_for_selector(f".jp-Toolbar-kernelName:has-text('{PROJECT_KERNELSPEC['display_name']}')",
                               timeout=60_000)
        time.sleep(SETTLE_S)
        page.screenshot(path=str(screenshot_dir() / "lab-notebook-opened.png"))
        assert page.locator(".jp-mod-dirty").count() == 0, "JupyterLab marked the notebook modified"
        page.keyboard.press("Control+s")
        time.sleep(3)
    assert _digest(tmp_path / NOTEBOOK) == committed
