"""The trial importer (docs/results/sdpa/history/trials.yaml -> trial runs), the journal read from
them, the UI's trials link, and `stagelab import` carrying trial runs between stores. A real
SQLite store; the fixture's numbers are made up for the tests (tests/fixtures/history)."""

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from stagelab.core import metrics as m
from stagelab.record import runs_view
from stagelab.record import tracking
from stagelab.core.errors import ConfigError
from stagelab.record.journal import journal_entries, journal_markdown, trials_filter, write_journals
from stagelab.record.trial_import import import_trials

FIXTURE = Path(__file__).parent / "fixtures" / "history" / "trials.yaml"
S8 = "s8_persistent_split"


def runs_by_name(stage: str = S8) -> dict:
    c = tracking.client()
    experiment = c.get_experiment_by_name("stagelab-sdpa")
    return {r.data.tags[m.TAG_TRIAL_NAME]: r for r in c.search_runs([experiment.experiment_id], trials_filter(stage))}


def utc_ms(*date) -> int:
    return int(datetime(*date, tzinfo=timezone.utc).timestamp() * 1000)


def test_each_entry_becomes_a_trial_run_once(tmp_store):
    assert import_trials(FIXTURE) == (3, 0)
    assert import_trials(FIXTURE) == (0, 3), "a second import adds nothing"
    runs = runs_by_name()
    assert set(runs) == {"ws_pv_ss", "late_merger"} and set(runs_by_name("s7_pingpong")) == {"wait_k_in_turn"}
    run = runs["ws_pv_ss"]
    tags = run.data.tags
    assert tags[m.TAG_IMPORTED_FROM].endswith("tests/fixtures/history/trials.yaml")
    assert tags[m.TAG_KIND] == m.KIND_TRIAL and tags[m.TAG_TRIAL_OF] == S8 and m.TAG_OUTCOME not in tags
    assert tags[m.TAG_TRIAL_COMMIT] == "e3ae422" and tags[m.TAG_VERDICT] == "valid_negative"
    assert tags[m.TAG_CONCLUSION] == "slower on every shape; code removed"
    assert run.info.start_time == utc_ms(2026, 11, 24)
    assert runs["late_merger"].info.start_time == utc_ms(2026, 11, 24) + 1, "one day's entries keep the file's order"
    assert runs_by_name("s7_pingpong")["wait_k_in_turn"].info.start_time == utc_ms(2026, 11, 20, 9, 30) + 2
    assert run.data.metrics["imported/tflops/4x16x4096x128/trial"] == 100
    assert run.data.metrics["imported/tflops/4x16x4096x128/default"] == 110
    assert run.data.metrics["imported/tflops/4x16x4096x128/clock_mhz"] == 1700
    patches = [a.path for a in tracking.client().list_artifacts(run.info.run_id, "trial/patches")]
    assert patches == ["trial/patches/WS_PV_SS.diff.txt"]
    assert tracking.client().list_artifacts(runs["late_merger"].info.run_id, "trial/patches") == []
    assert runs["late_merger"].data.tags[m.TAG_TRIAL_COMMIT] == "unknown"
    merger = runs["late_merger"].data.metrics
    assert merger["imported/us/2x8x512x64/merge phase. range low/contender.cudnn"] == 0.9
    assert merger["imported/us/2x8x512x64/merge phase. range low/trial"] == 0.5
    assert merger["imported/us/2x8x512x64/merge phase. range low/trial_2"] == 0.55, "a repeated row keeps its value"


def test_a_number_key_too_long_for_mlflow_is_cut_with_a_hash():
    from stagelab.record.trial_import import MLFLOW_MAX_KEY, number_metrics

    row = {"problem": "p" * 200, "metric": "us", "quantity": "q" * 200, "trial": 1.0, "default": 2.0}
    keys = number_metrics({"numbers": [row]})
    assert len(keys) == 2 and all(len(k) <= MLFLOW_MAX_KEY and k.startswith("imported/us/ppp") for k in keys)
    assert sorted(k.rsplit("/", 1)[1] for k in keys) == ["default", "trial"]


def test_a_changed_entry_is_imported_as_new_and_a_bad_file_writes_nothing(tmp_store, tmp_path):
    import_trials(FIXTURE)
    entries = yaml.safe_load(FIXTURE.read_text())
    entries[0]["conclusion"] = "a corrected conclusion"
    changed = tmp_path / "trials.yaml"
    changed.write_text(yaml.safe_dump(entries))
    assert import_trials(changed) == (1, 2)
    del entries[1]["verdict"]
    changed.write_text(yaml.safe_dump(entries))
    with pytest.raises(ConfigError, match=r"entry 1 \(late_merger\): missing \['verdict'\]"):
        import_trials(changed)
    entries[1].update(verdict="faster", stage="s99_nothing")
    changed.write_text(yaml.safe_dump(entries))
    with pytest.raises(ConfigError, match="unknown stage 's99_nothing'"):
        import_trials(changed)
    assert len(journal_entries(S8)) == 3, "the original, the corrected entry and late_merger; nothing more"


def test_the_journal_lists_trials_oldest_first_with_their_record(tmp_store, tmp_path):
    import_trials(FIXTURE)
    entries = journal_entries(S8)
    assert [e.name for e in entries] == ["ws_pv_ss", "late_merger"]
    text = journal_markdown(S8, entries)
    assert text.index("ws_pv_ss") < text.index("late_merger")
    assert "2 trials (1 inconclusive, 1 valid_negative)" in text
    assert "### 1. 2026-11-24 · `ge3ae422` · ws_pv_ss · **valid_negative**" in text
    unwrapped = " ".join(line.strip() for line in text.splitlines())  # lines are wrapped at about 100 columns
    assert "4x16x4096x128 tflops 100 vs 110 @1700 MHz; 2x8x512x64 us_per_launch 6.0 vs 5.5; 10/10 checks" in unwrapped
    assert "Conclusion: slower on every shape; code removed" in text and "Conclusion: (none yet" in text
    written = write_journals("sdpa", tmp_path)
    assert sorted(p.name for p in written) == ["journal-s7_pingpong.md", "journal-s8_persistent_split.md"]
    assert (tmp_path / "journal-s8_persistent_split.md").read_text() == text


def test_journal_command_prints_it(tmp_store, stagelab_cli):
    import_trials(FIXTURE)
    done = stagelab_cli("journal", S8)
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("ws_pv_ss") < done.stdout.index("late_merger") and "wait_k_in_turn" not in done.stdout
    assert done.stdout == journal_markdown(S8, journal_entries(S8)), "the same bytes as the file the report writes"


def test_the_trials_link_filters_trials_from_stage_runs(tmp_store, stagelab_cli):
    import_trials(FIXTURE)
    experiment_id = tracking.init_store("stagelab-sdpa")
    stage_run = tracking.create_run(experiment_id, S8, "acceptance")
    url = runs_view.trials_url("http://h:5000", experiment_id)
    assert url.startswith(f"http://h:5000/#/experiments/{experiment_id}/runs?workflowType=machine_learning")
    key = runs_view.TRIALS.key()
    assert url.endswith(f"viewStateShareKey={key}")
    state = json.loads(tracking.client().get_experiment(experiment_id).tags[runs_view.SHARED_VIEW_TAG_PREFIX + key])
    assert state["searchFilter"] == runs_view.TRIALS_FILTER and "tags.`stagelab.trial.verdict`" in state["selectedColumns"]
    found = tracking.client().search_runs([experiment_id], filter_string=runs_view.TRIALS_FILTER)
    assert len(found) == 3 and stage_run not in {r.info.run_id for r in found}
    done = stagelab_cli("ui", "--dry-run")
    assert f"stagelab-sdpa trials: http://127.0.0.1" in done.stdout and key in done.stdout, done.stdout


def test_stagelab_import_keeps_the_trial_tags_and_dates(tmp_path, monkeypatch):
    from stagelab.record.portable import import_store

    origin = tmp_path / "gpu-machine" / "mlflow.db"
    origin.parent.mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{origin}")
    import_trials(FIXTURE)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'here' / 'mlflow.db'}")
    (tmp_path / "here").mkdir()
    assert import_store(origin, progress=lambda _: None) == 3
    run = runs_by_name()["ws_pv_ss"]
    for key in (m.TAG_KIND, m.TAG_TRIAL_OF, m.TAG_IMPORTED_FROM, m.TAG_IMPORT_HASH, m.TAG_VERDICT, m.TAG_HYPOTHESIS):
        assert run.data.tags.get(key), key
    assert run.info.start_time == utc_ms(2026, 11, 24)
    assert [e.name for e in journal_entries(S8)] == ["ws_pv_ss", "late_merger"]
    assert import_trials(FIXTURE) == (0, 3), "trials merged from another store are not imported again"
    # the journal reads the same in every store the trials reach (a copy's run id would not)
    here, ids_here = journal_markdown(S8, journal_entries(S8)), [e.run_id for e in journal_entries(S8)]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{origin}")
    assert journal_markdown(S8, journal_entries(S8)) == here
    assert [e.run_id for e in journal_entries(S8)] == ids_here, "a copy goes by its origin's run id"
    assert "- Imported from" in here and "Run `" not in here


def test_a_slash_in_a_label_stays_inside_its_key_segment():
    from mlflow.utils.validation import _validate_metric_name

    from stagelab.record.trial_import import number_metrics

    row = {"problem": "2x8x512x64", "metric": "us", "quantity": "timeline (file s8 -DK=1) q_issued / loads // every K",
           "trial": 1.0}
    (key,) = number_metrics({"numbers": [row]})
    assert key.count("/") == 4 and key.endswith("/trial")
    _validate_metric_name(key)  # MLflow refuses a name that would read as another path


def test_a_run_that_fails_half_way_is_removed_so_a_second_import_writes_it(tmp_store, monkeypatch):
    import stagelab.record.trial_import as trial_import

    real = tracking.log_artifact
    monkeypatch.setattr(tracking, "log_artifact", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        trial_import.import_trials(FIXTURE)
    assert journal_entries(S8) == []
    monkeypatch.setattr(tracking, "log_artifact", real)
    assert trial_import.import_trials(FIXTURE) == (3, 0)


def test_imported_numbers_read_verbatim_without_scientific_notation():
    from stagelab.record.trial_import import key_numbers

    entry = {"numbers": [{"problem": "2x8x512x64", "metric": "other", "unit": "s", "trial": 1.066e-05,
                          "default": 2.5e-05, "contenders": {"cudnn": 3.0e-05}}]}
    text = key_numbers(entry)
    assert "0.00001066" in text and "0.000025" in text and "0.00003" in text and "e-0" not in text
    assert key_numbers({"numbers": [{"problem": "p", "metric": "us", "trial": 6.0}]}).endswith("p us 6.0")


def test_the_journal_keeps_words_says_imported_wraps_and_writes_numbers_in_fixed_notation(tmp_store, tmp_path):
    """The issue's journal: `3.66e+04` quoted from a stored check reason, apostrophes lost, commit
    `unknown` on imported entries, lines of 1,118 characters."""
    entry = yaml.safe_load(FIXTURE.read_text())[1]
    hypothesis = "s18's model keeps two warpgroups where the blocks' loads don't pay: " + "a long hypothesis " * 12
    entry.update(name="long_one", hypothesis=hypothesis, checks="two launches on the same inputs differ by "
                 "3.66e+04 (race?); error 5.58e-04 over budget 1.06e+37 on s8e4 problems; " + "FAIL 1x2x77x128 " * 20)
    history = tmp_path / "trials.yaml"
    history.write_text(yaml.safe_dump([entry]))
    import_trials(history)
    text = journal_markdown(S8, journal_entries(S8))
    assert "### 1. 2026-11-24 · imported · long_one · **inconclusive**" in text and "unknown" not in text
    assert max(len(line) for line in text.splitlines()) <= 100
    joined = " ".join(line.strip() for line in text.splitlines())
    assert "- Hypothesis: " + " ".join(hypothesis.split()) in joined  # every word, apostrophes included
    assert "differ by 36600 (race?); error 0.000558 over budget 1060000000000000" in joined
    assert "e+" not in text and "e-04" not in text and "s8e4 problems" in joined


def test_the_journal_writes_commits_so_none_reads_as_a_number():
    """The header's commit and one a conclusion names bare (`fixed at 61870e5`, `kernels/sdpa at
    24084e2`) read as 6.187e9 and 2.4084e6; the journal writes them as git describe does."""
    from stagelab.core.formatting import scientific_notation
    from stagelab.record.journal import JournalEntry, entry_markdown

    entry = JournalEntry("r1", 0, "61870e5b77421be34b59e869bd2a1cfd80dc2efc", "default",
                         "as kernels/sdpa at 24084e2 does", "2x8x512x64 us 7.0e-05 vs 6.5e-05", "inconclusive",
                         "", "the spill is fixed at 61870e5.", "docs/results/sdpa/history/trials.yaml")
    text = "\n".join(entry_markdown(1, entry))
    assert "· `g61870e5` · default ·" in text and "kernels/sdpa at g24084e2 does" in text
    assert "fixed at g61870e5." in text and "us 0.000070 vs 0.000065" in text
    assert not scientific_notation(text), text


def test_an_entry_edited_in_notation_alone_keeps_its_import(tmp_store, tmp_path):
    """trials.yaml's numbers and commits rewritten so none reads as scientific notation (issue 45): an
    entry that names the hash it was first imported under is no new trial; one that does not is a
    corrected trial, imported as new; a malformed `imported_as` is refused before anything is written."""
    from stagelab.record.trial_source import entry_hash

    import_trials(FIXTURE)
    entries = yaml.safe_load(FIXTURE.read_text())
    first = entries[0]["conclusion"]
    edited = tmp_path / "trials.yaml"
    entries[0].update(conclusion=first + " (at g1106e31)", imported_as=entry_hash(dict(entries[0], conclusion=first)))
    edited.write_text(yaml.safe_dump(entries))
    assert import_trials(edited) == (0, 3)
    entries[0]["imported_as"] = "not a hash"
    edited.write_text(yaml.safe_dump(entries))
    with pytest.raises(ConfigError, match="imported_as 'not a hash' is not an import hash"):
        import_trials(edited)
    del entries[0]["imported_as"]
    edited.write_text(yaml.safe_dump(entries))
    assert import_trials(edited) == (1, 2)
