"""Round-robin timing (stagelab.measure.sampling), on the CPU: the order in which contenders' samples are
taken, and the sampling loop itself with fake CUDA events (only record, query and elapsed_time are used)
and fake samplers whose runs log who ran and take a known time."""

from collections import Counter
from types import SimpleNamespace

import pytest

from stagelab.measure import sampling
from stagelab.measure.sampling import Sampler, round_robin_order, sample_round_robin

NAMES = ["stage", "parent/s13", "cudnn", "fa4"]


def test_every_round_samples_every_contender_once():
    order = round_robin_order(NAMES, rounds=7)
    assert Counter(order) == {name: 7 for name in NAMES}
    rounds = [order[i:i + len(NAMES)] for i in range(0, len(order), len(NAMES))]
    assert all(sorted(r) == sorted(NAMES) for r in rounds)


def test_over_two_rounds_per_contender_each_takes_every_position_equally_often():
    order = round_robin_order(NAMES, rounds=2 * len(NAMES))
    rounds = [order[i:i + len(NAMES)] for i in range(0, len(order), len(NAMES))]
    for position in range(len(NAMES)):
        assert Counter(r[position] for r in rounds) == {name: 2 for name in NAMES}


def test_no_contender_always_follows_the_same_one():
    order = round_robin_order(NAMES, rounds=2 * len(NAMES))
    rounds = [order[i:i + len(NAMES)] for i in range(0, len(order), len(NAMES))]
    for name in NAMES:
        before = {r[r.index(name) - 1] for r in rounds if r.index(name) > 0}
        assert len(before) == 2  # both of its neighbours in the cycle, never only one


def test_one_contender_is_simply_sampled_repeatedly():
    assert round_robin_order(["floor"], 3) == ["floor"] * 3


class FakeClock:
    def __init__(self):
        self.now_ms = 0.0


class FakeEvent:
    clock: FakeClock = None

    def __init__(self, enable_timing=False):
        self.at_ms = None

    def record(self):
        self.at_ms = FakeEvent.clock.now_ms

    def query(self):
        return True

    def elapsed_time(self, end):
        return end.at_ms - self.at_ms


@pytest.fixture
def fake_cuda(monkeypatch):
    FakeEvent.clock = FakeClock()
    monkeypatch.setattr(sampling.torch, "cuda", SimpleNamespace(Event=FakeEvent))
    return FakeEvent.clock


def _sampler(name, launch_ms, launches, log, clock):
    def run():
        log.append(name)
        clock.now_ms += launch_ms * launches

    def before():
        clock.now_ms += 1.0  # the flush or spin: not measured
    return Sampler(run, before, launches, bound_s=1.0)


def test_samples_are_taken_in_round_robin_order_and_reported_per_launch(fake_cuda):
    log = []
    samplers = {"stage": _sampler("stage", 0.010, 20, log, fake_cuda),
                "cudnn": _sampler("cudnn", 0.012, 20, log, fake_cuda),
                "floor": _sampler("floor", 0.002, 1, log, fake_cuda)}
    samples = sample_round_robin(samplers, repetitions=5, what="throughput timing")
    assert log == round_robin_order(list(samplers), 5)
    # microseconds per launch, the unmeasured `before` left out
    assert samples["stage"] == pytest.approx([10.0] * 5)
    assert samples["cudnn"] == pytest.approx([12.0] * 5)
    assert samples["floor"] == pytest.approx([2.0] * 5)


def test_an_unknown_mode_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="unknown timing mode 'warm'"):
        sampling.sampler(lambda: None, "warm", None, warmup=1)
    with pytest.raises(ValueError, match="cold timing needs an L2Flusher"):
        sampling.sampler(lambda: None, "cold", None, warmup=1)


def test_with_visits_each_contender_takes_its_samples_in_runs_in_round_robin_order(fake_cuda):
    log = []
    samplers = {name: _sampler(name, 0.010, 20, log, fake_cuda) for name in ("stage", "parent", "cudnn")}
    samples = sample_round_robin(samplers, repetitions=10, what="throughput timing", visits=4)
    runs = [log[0]]  # the contenders in the order their runs of samples came
    for previous, name in zip(log, log[1:]):
        if name != previous:
            runs.append(name)
    # rounds [stage parent cudnn], [cudnn parent stage] (reversed: cudnn's two visits meet at the seam), ...
    assert runs[:5] == ["stage", "parent", "cudnn", "parent", "stage"]
    assert log[:3] == ["stage"] * 3  # a visit: ceil(10 / 4) = 3 samples in a row, the last visit cut to make 10
    assert Counter(log) == {name: 10 for name in samplers}
    assert all(len(samples[name]) == 10 for name in samplers)


def test_visits_are_checked_where_the_parameter_file_is_read(tmp_path):
    from stagelab.core.errors import ConfigError
    from stagelab.core.params import load_params
    from stagelab.measure.sampling import timing_order

    def params_with(visits):
        path = tmp_path / f"visits{visits}.yaml"
        path.write_text(f"family: softmax\nshapes: [{{shape: [4, 1000]}}]\ntiming: {{repetitions: 100, visits: {visits}}}\n")
        return path
    assert load_params(params_with(4)).timing.visits == 4
    for bad in (3, 102, 0):
        with pytest.raises(ConfigError, match="visits"):
            load_params(params_with(bad))
    assert timing_order(None) == "round_robin" and timing_order(4) == "round_robin_4_visits"


def test_a_contender_slower_than_the_files_seconds_per_contender_takes_fewer_samples(fake_cuda):
    """acceptance.yaml's 1x683x2945x64: torch's math contender takes about 0.17 s a launch, 37 s of a
    notebook at 100 samples in two modes. Capped at 2 s it takes MIN_CAPPED_REPETITIONS; a contender
    whose samples fit takes them all; without a cap nothing is probed."""
    from stagelab.core.timing_spec import MIN_CAPPED_REPETITIONS
    from stagelab.measure.sampling import capped_repetitions

    log = []
    samplers = {"stage": _sampler("stage", 3.0, 1, log, fake_cuda), "math": _sampler("math", 170.0, 1, log, fake_cuda),
                "parent": _sampler("parent", 40.0, 1, log, fake_cuda)}
    assert capped_repetitions(samplers, 100, None, "cold timing") == dict.fromkeys(samplers, 100) and log == []
    wanted = capped_repetitions(samplers, 100, 2.0, "cold timing")
    assert wanted == {"stage": 100, "math": MIN_CAPPED_REPETITIONS, "parent": 50}  # 2 s / 40 ms
    assert log == ["stage", "math", "parent"], "one probe sample each"


def test_a_capped_contenders_samples_are_spread_over_the_rounds_not_taken_first(fake_cuda):
    log = []
    samplers = {"stage": _sampler("stage", 0.010, 1, log, fake_cuda), "math": _sampler("math", 1.0, 1, log, fake_cuda)}
    samples = sample_round_robin(samplers, {"stage": 10, "math": 2}, what="cold timing")
    assert len(samples["stage"]) == 10 and len(samples["math"]) == 2
    rounds_of_math = [log[:i].count("stage") for i, name in enumerate(log) if name == "math"]
    # its two samples in rounds 1 and 6 of 10, half the run apart (taken first, they would be in rounds 1 and 2)
    assert rounds_of_math[1] - rounds_of_math[0] >= 4, log


def test_a_capped_contender_reports_no_p99():
    import math

    from stagelab.measure.timing import summarize

    shape = SimpleNamespace(tag="1x683x2945x64", flops=lambda: 1e12, bytes_moved=lambda element_bytes: 1e9)
    capped = summarize([100.0 + i for i in range(20)], contender="math", shape=shape, mode="cold")
    full = summarize([100.0 + i for i in range(100)], contender="stage", shape=shape, mode="cold")
    assert math.isnan(capped.p99_us) and capped.repetitions == 20 and capped.p50_us == pytest.approx(109.5)
    assert full.p99_us == pytest.approx(198.01)


@pytest.mark.parametrize("value", [0, -1, "soon", True])
def test_seconds_per_contender_must_be_seconds_above_zero(tmp_path, value):
    from stagelab.core.errors import ConfigError
    from stagelab.core.params import load_params

    path = tmp_path / "capped.yaml"
    path.write_text(f"family: softmax\nshapes: [{{shape: [4, 1000]}}]\ntiming: {{seconds_per_contender: {value}}}\n")
    with pytest.raises(ConfigError, match="seconds_per_contender: expected a number of seconds above 0"):
        load_params(path)
    path.write_text("family: softmax\nshapes: [{shape: [4, 1000]}]\ntiming: {seconds_per_contender: 2}\n")
    assert load_params(path).timing.seconds_per_contender == 2.0
