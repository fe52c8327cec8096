"""`stagelab run --gpus`, `--shard` and `--strict`, without notebooks: what the values mean, that a bad one
is one line and exit 2 before anything is created, and when --strict fails a batch. The sweeps with
notebooks are in test_several_gpus (and test_batch)."""

import shutil

import pytest
import torch

from stagelab.core import metrics
from stagelab.cli import main
from stagelab.core.envinfo import read_clocks
from stagelab.core.errors import ConfigError
from stagelab.run.gpus import ASSUME_GPUS, Gpu, resolve_gpus
from stagelab.core.registry import family_registry
from stagelab.run.shard import Shard
from stagelab.run.workers import Slot, slots_for

BAD_VALUES = [
    (["--gpus", "0,0"], "--gpus '0,0': GPU 0 listed twice"),
    (["--gpus", "x"], "--gpus 'x': expected 'all' or GPU indices"),
    (["--gpus", "0,-1"], "(not '-1')"),
    (["--gpus", ""], "(not '')"),
    (["--shard", "3/2"], "--shard '3/2': k counts from 1 to n, so 1/2 to 2/2"),
    (["--shard", "0/2"], "k counts from 1 to n"),
    (["--shard", "1/0"], "n is the number of pieces, at least 1"),
    (["--shard", "half"], "expected k/n with whole numbers"),
]


@pytest.mark.parametrize("option, message", BAD_VALUES)
def test_a_bad_value_is_one_line_and_exit_2_before_any_work(tmp_path, tmp_store, capsys, option, message):
    code = main(["run", "--params", "params/smoke.yaml", *option])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("stagelab: error: ") and message in err, err
    assert not (tmp_path / "mlflow.db").exists()  # the store was never opened


@pytest.mark.skipif(torch.cuda.is_available() or shutil.which("nvidia-smi") is not None, reason="needs no GPU")
def test_gpus_all_without_a_gpu_says_so(tmp_path, tmp_store, capsys, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert main(["run", "--params", "params/smoke.yaml", "--gpus", "all"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stagelab: error: --gpus all: no GPU here") and err.count("\n") == 1
    assert not (tmp_path / "mlflow.db").exists()


def test_gpus_all_is_the_gpus_this_job_was_given(monkeypatch):
    """Under a scheduler that hands out GPUs through CUDA_VISIBLE_DEVICES (Slurm's --gres), `all` is those."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert [gpu.index for gpu in resolve_gpus("all")] == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a job given no GPU has none, whatever the machine holds
    with pytest.raises(ConfigError, match="--gpus all: no GPU here"):
        resolve_gpus("all")


@pytest.mark.skipif(torch.cuda.is_available() or shutil.which("nvidia-smi") is not None, reason="needs no GPU")
def test_a_gpu_that_is_not_there_is_refused_before_any_work(tmp_path, tmp_store, stagelab_cli, monkeypatch):
    """The issue's `stagelab run --gpus 7` on a machine without GPU 7: it ran and recorded a no_gpu run
    "on GPU 7"; now one line, exit 2, the store never opened."""
    monkeypatch.delenv(ASSUME_GPUS, raising=False)
    done = stagelab_cli("run", "--params", "params/smoke.yaml", "--gpus", "7")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == ("stagelab: error: --gpus '7': GPU 7 is not on this machine: it has no GPU "
                                            "(nvidia-smi and torch see none); without --gpus the stages are built "
                                            "and held to their gates (no_gpu rows)")
    assert not (tmp_path / "mlflow.db").exists()


def test_a_gpu_list_is_checked_against_the_machines_gpus(monkeypatch):
    monkeypatch.setenv(ASSUME_GPUS, "0,1,2")
    assert [gpu.index for gpu in resolve_gpus(" 1, 0")] == ["1", "0"]
    with pytest.raises(ConfigError, match=r"^--gpus '1,7': GPU 7 is not on this machine: it has GPU 0, 1, 2$"):
        resolve_gpus("1,7")
    assert resolve_gpus(None) is None


def test_a_slot_gives_its_notebook_only_its_gpu_and_records_it():
    slot = Slot(Gpu("1", "NVIDIA H200"))
    assert slot.env() == {"CUDA_VISIBLE_DEVICES": "1"}
    assert slot.tags() == {metrics.TAG_GPU_INDEX: "1", metrics.TAG_GPU: "NVIDIA H200"}
    assert Slot().env() == {} and Slot().tags() == {}  # without --gpus the notebook inherits the runner's


def test_clocks_are_read_from_the_notebooks_own_gpu(monkeypatch):
    """nvidia-smi ignores CUDA_VISIBLE_DEVICES: a notebook bound to GPU 1 must ask nvidia-smi for GPU 1."""
    from stagelab.core import envinfo

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert envinfo._this_gpu() == "1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert envinfo._this_gpu() == "0"
    assert isinstance(read_clocks(), dict)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 13])
def test_the_shards_of_a_sweep_are_disjoint_cover_it_and_keep_its_order(n):
    sweep = [(stage, params) for params in ("acceptance", "long") for stage in family_registry("sdpa").stages]
    pieces = [Shard.parse(f"{k}/{n}").pick(sweep) for k in range(1, n + 1)]
    assert sorted(pair for piece in pieces for pair in piece) == sorted(sweep)  # covering, and no pair twice
    for piece in pieces:
        assert piece == [pair for pair in sweep if pair in piece]  # the sweep's order
        assert len(piece) in (len(sweep) // n, -(-len(sweep) // n))  # as even as a deal can be
    assert pieces == [Shard.parse(f" {k} / {n} ").pick(list(sweep)) for k in range(1, n + 1)]  # deterministic


def test_shard_reads_back_as_written():
    assert str(Shard.parse("2/5")) == "2/5"
    with pytest.raises(ConfigError):
        Shard.parse("2/5/1")


def test_notebooks_side_by_side_share_the_cores(monkeypatch):
    """Two notebooks on a 32-core machine: each torch gets a pool of 16 threads, not 32 (measured on
    an nvidia-h200-x2: every cell of a notebook ran 10-40% longer beside another than alone)."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    slots = slots_for([Gpu("0", "NVIDIA H200"), Gpu("1", "NVIDIA H200")], cpus=32)
    assert [s.env() for s in slots] == [{"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "16"},
                                        {"CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "16"}]
    assert slots[1].tags()[metrics.TAG_CPU_THREADS] == "16"
    assert slots_for([Gpu("0", "")], cpus=32)[0].env() == {"CUDA_VISIBLE_DEVICES": "0"}  # alone: every core
    assert slots_for([Gpu(str(i), "") for i in range(8)], cpus=4)[0].env()["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's own setting is inherited, never replaced
    assert slots_for([Gpu("0", ""), Gpu("1", "")], cpus=32)[0].env() == {"CUDA_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize("outcomes, failure", [
    (["pass", "valid_negative"], None),
    (["pass", "no_gpu"], None),
    ([], None),  # a shard with nothing to run
    (["no_gpu", "incorrect", "error"], "2 stage(s) error, incorrect"),
    (["pass", "uncovered"], "1 stage(s) uncovered"),  # a launch plan its checks never reached
    (["no_gpu", "no_gpu"], "no stage could be judged: all 2 are no_gpu (no CUDA GPU visible here)"),
])
def test_strict_fails_on_a_broken_stage_and_on_a_batch_nothing_judged(outcomes, failure, monkeypatch, capsys):
    """`stagelab run --strict` exits 1 where a stage is broken, and where none could be judged (every
    stage no_gpu: green would read as checked kernels); the reason goes to stderr."""
    import pandas as pd

    from stagelab.run import batch

    summary = pd.DataFrame({"stage": [f"s{i}" for i in range(len(outcomes))], "outcome": outcomes,
                            "gpu": "", "run_id": "r"})
    monkeypatch.setattr(batch, "run_batch", lambda *args, **kwargs: summary)
    code = main(["run", "--params", "params/softmax-smoke.yaml", "--strict"])
    err = capsys.readouterr().err
    assert code == (0 if failure is None else 1)
    assert (failure is None and "--strict" not in err) or f"stagelab run --strict: {failure}" in err
    assert main(["run", "--params", "params/softmax-smoke.yaml"]) == 0, "without --strict nothing fails"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs no GPU")
def test_without_a_gpu_the_batch_says_first_what_it_will_and_will_not_do(stagelab_cli):
    """`make run` on a laptop: before, about 24 minutes of builds, then rows of no_gpu, said nowhere up front.
    (An unknown Jupyter kernel ends each notebook at once: the notice is what is tested.)"""
    done = stagelab_cli("run", "--params", "params/smoke.yaml", "--stages", "s0_baseline", "s1_cp_async",
                        "--kernel", "no-such-kernel")
    said = done.stdout + done.stderr
    notice = said.find("no CUDA GPU here: each of the 2 stage(s) will be built and held to its resource gates")
    assert notice >= 0 and "every row will read no_gpu" in said and "up to ~2 min" in said, said[-2000:]
    assert notice < said.find("s0_baseline: error")  # before the first stage ends
