"""A trial's conclusion outlives the store it was noted in: `try note` keeps it in
docs/results/<family>/conclusions.yaml, and `stagelab import` sets it on the copies of that trial's run
in a fresh store (a checkout that imports the records, which were taken before the note)."""

import time

import pytest

from stagelab import cli
from stagelab.core import metrics
from stagelab.core.errors import ConfigError
from stagelab.core.paths import WORKSPACE_ENV
from stagelab.record import tracking
from stagelab.record.conclusions_file import conclusions_path, read_conclusions
from stagelab.record.trial_record import add_conclusion


def use_store(monkeypatch, db):
    db.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    return tracking.init_store("stagelab-sdpa")


def trial_run(experiment_id, name):
    run_id = tracking.create_run(experiment_id, "s19_int8", "try-int8", {
        metrics.TAG_KIND: metrics.KIND_TRIAL, metrics.TAG_TRIAL_OF: "s19_int8", metrics.TAG_TRIAL_NAME: name},
        name=f"s19_int8 try {name}")
    tracking.end_run(run_id)
    return run_id


def conclusions_by_name():
    experiment = tracking.client().get_experiment_by_name("stagelab-sdpa")
    runs = tracking.client().search_runs([experiment.experiment_id])
    return {r.data.tags[metrics.TAG_TRIAL_NAME]: r.data.tags.get(metrics.TAG_CONCLUSION) for r in runs}


@pytest.fixture
def gpu_store(tmp_path, monkeypatch):
    """A GPU machine's store with two trials, brought back and imported into a laptop's store."""
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "workspace"))
    machine = tmp_path / "gpu-machine" / "mlflow.db"
    experiment_id = use_store(monkeypatch, machine)
    printed = {}
    for name in ("int_max3", "d128_192key"):
        printed[name] = trial_run(experiment_id, name)
        time.sleep(0.01)  # start times apart, as two trials' are
    use_store(monkeypatch, tmp_path / "laptop" / "mlflow.db")
    assert cli.main(["import", str(machine)]) == 0
    return machine, printed


def test_a_conclusion_noted_after_the_record_reaches_a_fresh_store(gpu_store, tmp_path, monkeypatch, capsys):
    machine, printed = gpu_store
    add_conclusion(printed["int_max3"], "slower: fewer instructions, longer tile")
    [kept] = read_conclusions(conclusions_path("sdpa"))
    assert (kept.stage, kept.run) == ("s19_int8", printed["int_max3"])  # the id the machine printed
    assert kept.trial == "int_max3" and kept.conclusion == "slower: fewer instructions, longer tile"
    use_store(monkeypatch, tmp_path / "fresh-checkout" / "mlflow.db")
    capsys.readouterr()
    assert cli.main(["import", str(machine)]) == 0  # the record: the machine's store, as it was
    assert "1 trial run(s) given the conclusion kept for them" in capsys.readouterr().out
    assert conclusions_by_name() == {"int_max3": "slower: fewer instructions, longer tile", "d128_192key": None}
    assert cli.main(["import", str(machine)]) == 0  # nothing new, nothing to set again
    assert "given the conclusion" not in capsys.readouterr().out


def test_noting_again_replaces_the_kept_conclusion(gpu_store, tmp_path, monkeypatch):
    machine, printed = gpu_store
    add_conclusion(printed["d128_192key"], "first reading")
    add_conclusion(printed["int_max3"], "slower")
    add_conclusion(printed["d128_192key"], "second reading")
    kept = read_conclusions(conclusions_path("sdpa"))
    assert [(c.trial, c.conclusion) for c in kept] == [("int_max3", "slower"), ("d128_192key", "second reading")]
    use_store(monkeypatch, tmp_path / "fresh-checkout" / "mlflow.db")
    assert cli.main(["import", str(machine)]) == 0
    assert conclusions_by_name() == {"int_max3": "slower", "d128_192key": "second reading"}


def test_a_damaged_file_is_refused_by_name(tmp_path):
    path = tmp_path / "conclusions.yaml"
    path.write_text("entries:\n- stage: s19_int8\n  trial: x\n")
    with pytest.raises(ConfigError, match="entry 1: expected the keys"):
        read_conclusions(path)
    path.write_text("entries:\n- {stage: s, trial: t, started_ms: soon, started: d, imported_from: '', run: r, conclusion: c}\n")
    with pytest.raises(ConfigError, match="started_ms must be an integer"):
        read_conclusions(path)


def test_a_journal_page_gives_back_the_conclusions_it_shows():
    """tools/recover_conclusions.py finds a page's entries by the lines the journal writes from the run,
    and unwraps each conclusion to its words."""
    from tool_module import load_tool

    from stagelab.record.journal import JournalEntry, journal_markdown

    recover = load_tool("recover_conclusions")
    long_words = "Refuted: the tile is no shorter than s18's (2499 cycles against 2465). " * 3
    noted = JournalEntry("a" * 32, 1795900000000, "f413455", "s19_int8_int_max3", "why", "0.977x default",
                         "valid_negative", "below the bar", long_words.strip(), "")
    imported = JournalEntry("b" * 32, 1795824000000, "", "timeline 4x16x4096x128", "", "", "inconclusive", "",
                            "", "/tmp/tl3/timeline-0.trials.yaml")
    shown = recover.page_entries(journal_markdown("s19_int8", [noted, imported]))
    assert shown == {recover.store_key(noted): long_words.strip()}  # the one without a conclusion is left out
    assert recover.store_key(noted)[1] == f"- Run `{'a' * 32}`"
