"""The MLflow UI as a person sees it, in headless Chromium, on a store that moved folders.

A batch runs two stages (the second has the first as parent) into a store in one folder; the
recorder adds what a GPU would have measured (gpu_record); the store is copied to another folder
and the first deleted; `stagelab ui` serves the copy. The runs table and a run's pages must show
what docs/RECORD.md promises. Screenshots go to test-artifacts/ui/.
"""

import os
import re
import shutil
import sys
from pathlib import Path

import mlflow
import pytest

from browser import VIEWPORT, browser_page, screenshot_dir
from gpu_record import STAND_IN_GPU, record_gpu_results
from services import LOOPBACK, free_port, http_server
from stagelab.run.batch import run_batch
from stagelab.core.registry import find_stage
from stagelab.record.trial_import import import_trials

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
PARAMS = "params/smoke.yaml"
STAGES = ("s0_baseline", "s1_cp_async")
TRIALS = Path(__file__).parent / "fixtures" / "history" / "trials.yaml"  # three trial runs, two of s8
P50_US = {"s0_baseline": 40.0, "s1_cp_async": 30.0}  # s1 1.33x its parent: above min_gain, so `pass`
RENDER_TIMEOUT_MS = 60_000  # the UI's first load compiles nothing, but 2 busy cores make it slow


def _make_store(folder: Path) -> dict[str, str]:
    """The batch's runs with a GPU's results added; returns stage -> run id."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
        summary = run_batch(list(STAGES), PARAMS, progress=False)
        run_ids = dict(zip(summary["stage"], summary["run_id"]))
        for stage in STAGES:
            parent = find_stage(stage)[1].parent
            record_gpu_results(run_ids[stage], stage, PARAMS, P50_US[stage], P50_US.get(parent))
        import_trials(TRIALS, progress=lambda _: None)
    return run_ids


@pytest.fixture(scope="module")
def moved_store_ui(tmp_path_factory):
    """`stagelab ui` on a copy of the store; yields (base url, runs-table url, stage -> run id); the
    trials link is in the module's TRIALS_URL."""
    tmp = tmp_path_factory.mktemp("ui")
    origin = tmp / "gpu-machine" / "mlruns"
    origin.mkdir(parents=True)
    run_ids = _make_store(origin)
    moved = tmp / "laptop" / "mlruns"
    shutil.copytree(origin, moved)
    shutil.rmtree(origin)  # the machine the runs happened on is gone
    port = free_port()
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{moved / 'mlflow.db'}"}
    log = tmp / "ui.log"
    base = f"http://{LOOPBACK}:{port}"
    with http_server([sys.executable, "-m", "stagelab", "ui", "--port", str(port)], base, log, env):
        printed = re.search(r"sdpa: (\S+)", log.read_text())
        trials = re.search(r"sdpa trials: (\S+)", log.read_text())
        assert printed and trials, log.read_text()
        TRIALS_URL.append(trials.group(1))
        yield base, printed.group(1), run_ids


TRIALS_URL: list[str] = []


def _cell(page, run_id: str, column: str) -> str:
    """The text of one runs-table cell (ag-grid: rows carry the run id, cells the column key), which
    must be on the first screen: a column scrolled out of sight, or a row below the fold, is one a
    person does not see."""
    cell = page.locator(f'[row-id="{run_id}"] [col-id="{column}"]').first
    box, grid = cell.bounding_box(), page.locator(".ag-root-wrapper").first.bounding_box()
    assert box is not None and box["x"] + box["width"] <= grid["x"] + grid["width"], f"{column} is off screen"
    assert box["y"] + box["height"] <= VIEWPORT["height"], f"{column} of {run_id} is below the first screen"
    return cell.inner_text().strip()


def test_stage_comparison_names_the_best_stage_on_the_first_screen(moved_store_ui):
    """From the printed link, without a click: the best stage on the mission problem (s1, 30 µs
    against s0's 40) first, with where it is best, its GPU and parameter file, and a summary whose
    numbers are rounded; no trial run among the stage runs."""
    _, runs_url, run_ids = moved_store_ui
    best = run_ids["s1_cp_async"]
    with browser_page() as page:
        page.goto(runs_url)
        page.locator(f'[row-id="{best}"] [col-id="tags.`stagelab.best_on`"]').first.wait_for(timeout=RENDER_TIMEOUT_MS)
        page.screenshot(path=str(screenshot_dir() / "stage_comparison.png"))  # the first screen only
        rows = {stage: page.locator(f'[row-id="{run_id}"] [col-id="tags.`gpu`"]').first.bounding_box()["y"]
                for stage, run_id in run_ids.items()}
        assert rows["s1_cp_async"] < rows["s0_baseline"], f"the best stage is not above the other: {rows}"
        best_on = _cell(page, best, "tags.`stagelab.best_on`")
        assert best_on.startswith("smoke: best on 2/2: 1x2x33x64_causal 30 µs"), best_on
        assert _cell(page, best, "tags.`gpu`") == STAND_IN_GPU
        assert _cell(page, best, "tags.`params_file`") == "smoke"
        summary = _cell(page, best, "tags.`stagelab.summary`")
        assert summary.startswith("pass · mission p50 30 µs · 1.33x vs s0_baseline"), summary
        assert _cell(page, run_ids["s0_baseline"], "tags.`stagelab.best_on`") == "-"  # best nowhere: no tag
        assert page.get_by_text("s8_persistent_split try").count() == 0, "a trial run among the stage runs"


def test_runs_table_shows_every_stage_with_outcome_and_mission_p50(moved_store_ui):
    """Each stage's summary on the first screen: its outcome and mission p50, rounded."""
    base, runs_url, run_ids = moved_store_ui
    with browser_page() as page:
        page.goto(runs_url)
        for stage in STAGES:
            page.get_by_text(f"{stage}@smoke").wait_for(timeout=RENDER_TIMEOUT_MS)
        page.locator('[col-id="tags.`stagelab.summary`"]').first.wait_for(timeout=RENDER_TIMEOUT_MS)
        page.screenshot(path=str(screenshot_dir() / "runs_table.png"), full_page=True)
        for stage, run_id in run_ids.items():
            assert _cell(page, run_id, "tags.`stagelab.summary`").startswith(f"pass · mission p50 {P50_US[stage]:.0f} µs")


def _open_artifact(page, base: str, experiment_id: str, run_id: str, path: str) -> None:
    page.goto("about:blank")  # a full load: a hash change alone does not reselect the file
    page.goto(f"{base}/#/experiments/{experiment_id}/runs/{run_id}/artifacts/{path}")
    page.get_by_text(path, exact=True).first.wait_for(timeout=RENDER_TIMEOUT_MS)


def _preview_shows(page, text: str, shot: str) -> None:
    page.get_by_text(text).first.wait_for(timeout=RENDER_TIMEOUT_MS)
    page.screenshot(path=str(screenshot_dir() / shot), full_page=True)


def test_run_page_shows_description_plots_notebook_ptxas_and_diff(moved_store_ui):
    base, _, run_ids = moved_store_ui
    stage, run_id = "s1_cp_async", run_ids["s1_cp_async"]
    experiment_id = mlflow.tracking.MlflowClient(base).get_run(run_id).info.experiment_id
    title = find_stage(stage)[1].title
    with browser_page() as page:
        page.goto(f"{base}/#/experiments/{experiment_id}/runs/{run_id}")
        page.get_by_text(title).first.wait_for(timeout=RENDER_TIMEOUT_MS)  # the description's heading
        page.get_by_text("Result: pass").first.wait_for(timeout=RENDER_TIMEOUT_MS)  # its summary, above it
        assert page.get_by_text("1.33x").count() >= 1  # rounded (the metrics list below keeps every digit)
        page.screenshot(path=str(screenshot_dir() / "run_overview.png"), full_page=True)
        for plot in ("latency_hot.png", "error_budget.png"):
            _open_artifact(page, base, experiment_id, run_id, plot)
            image = page.locator('img[src^="blob:"]').first
            image.wait_for(timeout=RENDER_TIMEOUT_MS)
            assert image.evaluate("img => img.complete && img.naturalWidth") > 0, f"{plot} did not load"
            page.screenshot(path=str(screenshot_dir() / f"artifact_{plot}"), full_page=True)
        expected_text = {
            f"notebook/{stage}.ipynb": '"papermill"',  # the executed notebook: papermill's metadata
            "ptxas.log": "registers",
            f"source/s0_baseline_to_{stage}.diff.txt": f"+++ kernels/sdpa/{stage}.cu",
        }
        for path, text in expected_text.items():
            _open_artifact(page, base, experiment_id, run_id, path)
            _preview_shows(page, text, "artifact_" + path.replace("/", "_") + ".png")


def test_trials_link_shows_the_trial_runs_only(moved_store_ui):
    """The trials link (`stagelab ui` prints it) opens the runs table filtered to trial runs, with the
    trials' columns: the imported s8 trials with their verdicts, and none of the batch's stage runs."""
    with browser_page() as page:
        page.goto(TRIALS_URL[0])
        page.get_by_text("s8_persistent_split try ws_pv_ss").first.wait_for(timeout=RENDER_TIMEOUT_MS)
        page.get_by_text("s8_persistent_split try late_merger").first.wait_for(timeout=RENDER_TIMEOUT_MS)
        page.locator('[col-id="tags.`stagelab.trial.verdict`"]').first.wait_for(timeout=RENDER_TIMEOUT_MS)
        page.screenshot(path=str(screenshot_dir() / "trials_table.png"), full_page=True)
        assert page.get_by_text("valid_negative").count() >= 1
        for column in ("tags.`stagelab.summary`", "tags.`stagelab.trial.gpu`", "tags.`params_file`"):
            assert page.locator(f'[col-id="{column}"]').count() >= 1, column
        for stage in STAGES:
            assert page.get_by_text(f"{stage}@smoke").count() == 0, f"{stage}'s stage run is not a trial"
