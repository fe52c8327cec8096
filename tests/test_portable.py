"""A store copied to another folder opens with its artifacts; importing it twice adds its runs once."""

import shutil

import mlflow

from stagelab.record import tracking
import gzip
import lzma

import pytest

from stagelab.core.errors import ConfigError
from stagelab.record.portable import import_record, import_store
from stagelab.record.sqlite_store import relocate


def make_store(folder, monkeypatch, stage="s0_baseline"):
    db = folder / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    experiment_id = tracking.init_store("stagelab-sdpa")
    run_id = tracking.create_run(experiment_id, stage, "acceptance", {"outcome": "pass"})
    tracking.log_metrics(run_id, {"mission_p50_us": 12.5})
    note = folder / "ptxas.log"
    note.write_text("ptxas info: Used 96 registers\n")
    tracking.log_artifact(run_id, note)
    note.unlink()
    tracking.end_run(run_id)
    return db, run_id


def test_copied_store_finds_its_artifacts(tmp_path, monkeypatch):
    db, run_id = make_store(tmp_path / "gpu-machine" / "mlruns", monkeypatch)
    moved = tmp_path / "laptop" / "mlruns"
    shutil.copytree(db.parent, moved)
    shutil.rmtree(db.parent)  # the machine the runs happened on is gone
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{moved / 'mlflow.db'}")
    tracking.init_store("stagelab-sdpa")  # opening the store relocates it
    run = tracking.client().get_run(run_id)
    assert run.info.artifact_uri.startswith((moved / "artifacts").as_uri())
    local = tracking.client().download_artifacts(run_id, "ptxas.log", str(tmp_path))
    assert "96 registers" in open(local).read()
    assert relocate(moved / "mlflow.db") == 0  # nothing left to move


def test_import_merges_once(tmp_path, monkeypatch):
    source_db, source_run = make_store(tmp_path / "brought-back" / "mlruns", monkeypatch, "s3b_register_softmax")
    local_db, local_run = make_store(tmp_path / "here" / "mlruns", monkeypatch, "s0_baseline")
    assert import_store(source_db, progress=lambda _: None) == 1
    assert import_store(source_db, progress=lambda _: None) == 0
    runs = mlflow.search_runs(experiment_names=["stagelab-sdpa"])
    assert sorted(runs["tags.stage"]) == ["s0_baseline", "s3b_register_softmax"]
    imported = runs[runs["tags.stage"] == "s3b_register_softmax"].iloc[0]
    assert imported["metrics.mission_p50_us"] == 12.5 and imported["status"] == "FINISHED"
    assert imported["tags.stagelab.imported_from_run"] == source_run
    artifacts = [a.path for a in tracking.client().list_artifacts(imported["run_id"])]
    assert artifacts == ["ptxas.log"]


@pytest.mark.parametrize("suffix, compress", [(".db.gz", gzip.compress), (".db.xz", lzma.compress)])
def test_a_compressed_record_imports_its_runs_without_their_artifacts(tmp_path, monkeypatch, suffix, compress):
    source_db, source_run = make_store(tmp_path / "session" / "mlruns", monkeypatch, "s9_fp8")
    record = tmp_path / "records" / f"h100{suffix}"
    record.parent.mkdir()
    record.write_bytes(compress(source_db.read_bytes()))
    shutil.rmtree(source_db.parent)  # only the record is left, as in a new checkout
    make_store(tmp_path / "here" / "mlruns", monkeypatch, "s0_baseline")
    assert import_record(record, progress=lambda _: None) == 1
    assert import_record(record, progress=lambda _: None) == 0
    runs = mlflow.search_runs(experiment_names=["stagelab-sdpa"])
    imported = runs[runs["tags.stage"] == "s9_fp8"].iloc[0]
    assert imported["metrics.mission_p50_us"] == 12.5 and imported["tags.stagelab.imported_from_run"] == source_run
    packing = "xz" if suffix == ".db.xz" else "gzip"
    garbage = tmp_path / "records" / f"bad{suffix}"
    garbage.write_bytes(b"not compressed at all")
    with pytest.raises(ConfigError, match=f"bad{suffix} is not an {packing}-compressed MLflow database"):
        import_record(garbage)


def test_import_takes_several_stores_and_a_glob_and_checks_them_all_first(tmp_path, monkeypatch, capsys):
    from stagelab.cli import main

    records = tmp_path / "records"
    records.mkdir()
    for stage, suffix, compress in (("s1_cp_async", ".db.gz", gzip.compress), ("s2_wmma", ".db.xz", lzma.compress)):
        db, _ = make_store(tmp_path / stage / "mlruns", monkeypatch, stage)
        (records / f"{stage}{suffix}").write_bytes(compress(db.read_bytes()))
    third, _ = make_store(tmp_path / "third" / "mlruns", monkeypatch, "s3a_no_sp")
    make_store(tmp_path / "here" / "mlruns", monkeypatch, "s0_baseline")

    assert main(["import", str(third.parent), str(tmp_path / "nowhere.db.gz")]) == 2
    assert "nothing to import at " + str(tmp_path / "nowhere.db.gz") in capsys.readouterr().err
    assert len(mlflow.search_runs(experiment_names=["stagelab-sdpa"])) == 1  # nothing imported: the check came first

    assert main(["import", str(records / "*.db.*"), str(third.parent)]) == 0  # the glob quoted, as the shell leaves it
    out = capsys.readouterr().out
    assert out.count("imported 1 new run(s) from") == 3 and out.splitlines()[-1] == "imported 3 new run(s) in all"
    runs = mlflow.search_runs(experiment_names=["stagelab-sdpa"])
    assert sorted(runs["tags.stage"]) == ["s0_baseline", "s1_cp_async", "s2_wmma", "s3a_no_sp"]


def test_a_conclusion_reaches_an_imported_trial_by_the_id_its_gpu_machine_printed(tmp_path, monkeypatch):
    from stagelab.core import metrics
    from stagelab.core.paths import WORKSPACE_ENV
    from stagelab.record.trial_record import add_conclusion

    source_db = tmp_path / "gpu-machine" / "mlruns" / "mlflow.db"
    source_db.parent.mkdir(parents=True)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{source_db}")
    experiment_id = tracking.init_store("stagelab-sdpa")
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "workspace"))  # the kept conclusions go there
    printed_id = tracking.create_run(experiment_id, "s19_int8", "try-int8", {
        metrics.TAG_KIND: metrics.KIND_TRIAL, metrics.TAG_TRIAL_OF: "s19_int8", metrics.TAG_TRIAL_NAME: "skip_magic"})
    tracking.end_run(printed_id)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'laptop' / 'mlflow.db'}")
    tracking.init_store("stagelab-sdpa")
    assert import_store(source_db, progress=lambda _: None) == 1
    assert add_conclusion(printed_id, "folded") == "skip_magic"
    [copy] = tracking.client().search_runs([tracking.client().get_experiment_by_name("stagelab-sdpa").experiment_id])
    assert copy.info.run_id != printed_id
    assert copy.data.tags[metrics.TAG_CONCLUSION] == "folded"
    with pytest.raises(ConfigError, match="nor one imported from a run of that id"):
        add_conclusion("0123456789abcdef0123456789abcdef", "nothing there")


def test_backup_record_packs_the_store_vacuumed_and_it_imports(tmp_path, monkeypatch, capsys):
    """`stagelab backup --record F.db.xz`: a record as the sessions keep them, smaller than the store
    packed as it is (a store keeps the pages of what it deleted), with every run."""
    import sqlite3
    from contextlib import closing

    from stagelab.cli.main import main

    source_db, source_run = make_store(tmp_path / "session" / "mlruns", monkeypatch, "s9_fp8")
    with closing(sqlite3.connect(source_db)) as conn:  # a table dropped: its pages stay in the file
        conn.execute("CREATE TABLE filler (x)")
        conn.execute("INSERT INTO filler VALUES (randomblob(1000000))")
        conn.commit()
        conn.execute("DROP TABLE filler")
        conn.commit()
    record = tmp_path / "records" / "session.db.xz"
    assert main(["backup", "--record", str(record)]) == 0
    assert f"as the record {record}" in capsys.readouterr().out
    assert record.stat().st_size < len(lzma.compress(source_db.read_bytes(), preset=9 | lzma.PRESET_EXTREME))
    make_store(tmp_path / "here" / "mlruns", monkeypatch, "s0_baseline")
    assert import_record(record, progress=lambda _: None) == 1
    runs = mlflow.search_runs(experiment_names=["stagelab-sdpa"])
    assert runs[runs["tags.stage"] == "s9_fp8"].iloc[0]["tags.stagelab.imported_from_run"] == source_run
    assert main(["backup", "--record", str(tmp_path / "session.db.gz")]) != 0
    assert "a record is written as `*.db.xz`, not session.db.gz" in capsys.readouterr().err
