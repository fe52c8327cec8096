"""The pieces the team server and the UI rest on, without starting either (fast)."""

import json

import pytest

from stagelab import cli

from stagelab.record import runs_view, tracking
from stagelab.core.errors import ConfigError
from stagelab.run.server import server_command


def test_store_carries_the_runs_table_view(tmp_store):
    experiment_id = tracking.init_store("stagelab-sdpa")
    tracking.init_store("stagelab-sdpa")  # a second open writes nothing new
    tags = tracking.client().get_experiment(experiment_id).tags
    views = sorted(k for k in tags if k.startswith(runs_view.SHARED_VIEW_TAG_PREFIX))
    assert views == sorted(runs_view.SHARED_VIEW_TAG_PREFIX + view.key() for view in runs_view.VIEWS)
    stages = json.loads(tags[runs_view.SHARED_VIEW_TAG_PREFIX + runs_view.STAGES.key()])
    # the answer first: where each run is best, its summary, its GPU and parameter file
    assert stages["selectedColumns"][:4] == ["tags.`stagelab.best_on`", "tags.`stagelab.summary`", "tags.`gpu`",
                                             "tags.`params_file`"]
    assert "tags.`outcome`" in stages["selectedColumns"] and "metrics.`mission_p50_us`" in stages["selectedColumns"]
    assert stages["searchFilter"] == "tags.`outcome` LIKE '%'"
    assert (stages["orderByKey"], stages["orderByAsc"]) == ("tags.`stagelab.best_on`", True)
    trials = json.loads(tags[runs_view.SHARED_VIEW_TAG_PREFIX + runs_view.TRIALS.key()])
    assert "tags.`stagelab.trial.verdict`" in trials["selectedColumns"] and \
        "metrics.`speedup_vs_default_geomean`" in trials["selectedColumns"]
    assert {"tags.`stagelab.trial.gpu`", "tags.`params_file`", "tags.`stagelab.summary`"} <= set(trials["selectedColumns"])
    url = runs_view.runs_url("http://127.0.0.1:5000/", experiment_id)
    assert url == (f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
                   f"&viewStateShareKey={runs_view.STAGES.key()}")


def test_ui_prints_the_view_for_a_store_written_before_it(tmp_store, capsys):
    c = tracking.client()
    experiment_id = c.create_experiment("stagelab-sdpa")  # an older store: no view tag yet
    assert cli.main(["ui", "--dry-run", "--port", "5999"]) == 0
    printed = capsys.readouterr().out
    assert runs_view.runs_url("http://127.0.0.1:5999", experiment_id) in printed
    assert runs_view.SHARED_VIEW_TAG_PREFIX + runs_view.STAGES.key() in c.get_experiment(experiment_id).tags


def test_server_command_is_postgres_with_proxied_artifacts_on_loopback(tmp_path):
    pytest.importorskip("psycopg")
    command = server_command("postgresql://lab@db:5432/stagelab", tmp_path / "artifacts")
    assert command[command.index("--backend-store-uri") + 1] == "postgresql://lab@db:5432/stagelab"
    assert "--serve-artifacts" in command
    assert command[command.index("--artifacts-destination") + 1] == (tmp_path / "artifacts").as_uri()
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert "0.0.0.0" in server_command("postgresql://lab@db/stagelab", tmp_path, host="0.0.0.0")


def test_server_refuses_sqlite_with_a_clear_error(tmp_path, capsys):
    with pytest.raises(ConfigError, match="must be PostgreSQL"):
        server_command(f"sqlite:///{tmp_path}/mlflow.db", tmp_path)
    assert cli.main(["server", "--backend-store-uri", "sqlite:///x.db", "--artifacts-destination", "a"]) == 2
    assert "must be PostgreSQL" in capsys.readouterr().err
