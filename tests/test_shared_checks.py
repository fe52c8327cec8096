"""Several kernels checked on one set of inputs (measure.family_checks.check_kernels): each kernel's
verdicts are those check_all gives it alone, the yardstick is made once per check for all of them,
and a trial session takes that path where its builds check the same way (CPU; torch functions stand
in for kernels)."""

import pytest
import torch

from stagelab.core.errors import KernelHang
from stagelab.families.sdpa import FAMILY as SDPA, Shape, attention
from stagelab.measure.family_checks import CheckAborted, check_all, check_kernels

SHAPES = [Shape(1, 2, 77, 64, True), Shape(2, 1, 33, 128, False)]


def correct(q, k, v, out, scale, causal):
    out.copy_(attention(q, k, v, scale, causal, torch.float32))


def scales_twice(q, k, v, out, scale, causal):
    out.copy_(attention(q, k, v, scale * scale, causal, torch.float32))


def boom(q, k, v, out, scale, causal):
    raise RuntimeError("kernel launch failed: invalid argument")


def comparable(results):
    """The fields a verdict consists of (the plan is compared on its own); floats as text, so NaN equals NaN."""
    return [(r.shape, r.dtype, r.seed, r.distribution, r.passed, r.reason, str(r.max_abs_err), str(r.budget))
            for r in results]


class CountingReferences(type(SDPA)):
    """sdpa with its reference calls counted: what a shared pass saves."""

    def __init__(self):
        self.references = 0

    def reference(self, problem, inputs, compute_dtype):
        self.references += 1
        return super().reference(problem, inputs, compute_dtype)


@pytest.mark.parametrize("distributions", [("normal",), ("normal", "large")])
def test_each_kernel_gets_the_verdicts_it_gets_alone_from_one_reference_per_check(distributions):
    kernels = {"default": correct, "twice": scales_twice, "boom": boom}
    family = CountingReferences()
    shared = check_kernels(family, kernels, SHAPES, ["float16", "bfloat16"], [0, 1], "cpu",
                           distributions=distributions)
    checks = len(SHAPES) * 2 * 2 * len(distributions)
    assert family.references == 2 * checks, "the float64 and the plain reference, once per check for all kernels"
    for label, kernel in kernels.items():
        alone = check_all(SDPA, kernel, SHAPES, ["float16", "bfloat16"], [0, 1], "cpu", distributions=distributions)
        assert comparable(shared[label]) == comparable(alone), label
    assert all(r.passed for r in shared["default"])
    assert not any(r.passed for r in shared["twice"] if r.distribution == "normal")
    assert "over budget" in shared["twice"][0].reason
    assert "invalid argument" in shared["boom"][0].reason, "a crash is that kernel's failed check"


def test_each_kernel_keeps_the_plan_its_own_launches_took():
    plans = {}

    def planned(name):
        def kernel(q, k, v, out, scale, causal):
            plans["last"] = f"{name}-{q.shape[2]}"
            correct(q, k, v, out, scale, causal)
        return kernel

    readers = {label: (lambda: plans["last"]) for label in ("a", "b")}
    shared = check_kernels(SDPA, {"a": planned("a"), "b": planned("b")}, SHAPES, ["float16"], [0], "cpu",
                           plan_of=readers)
    assert [r.plan for r in shared["a"]] == ["a-77", "a-33"] and [r.plan for r in shared["b"]] == ["b-77", "b-33"]


def test_a_hang_ends_the_pass_naming_the_kernel():
    def hangs(q, k, v, out, scale, causal):
        raise KernelHang("check 1x2x77x64 float16 seed 0", 30.0, 20.0)

    with pytest.raises(CheckAborted) as aborted:
        check_kernels(SDPA, {"default": correct, "hangs": hangs}, SHAPES, ["float16"], [0], "cpu")
    assert aborted.value.label == "hangs" and isinstance(aborted.value.cause, KernelHang)


def test_a_misspelt_distribution_fails_before_any_launch():
    launched = []

    def kernel(q, k, v, out, scale, causal):
        launched.append(1)

    with pytest.raises(Exception, match="hug"):
        check_kernels(SDPA, {"a": kernel}, SHAPES, ["float16"], [0], "cpu", distributions=["normal", "hug"])
    assert not launched


# -- the trial session's choice ---------------------------------------------------------------------


def _session(monkeypatch, tmp_path, kind_checks=None):
    """A softmax trial session with two ready trials (builds faked), its family's kind checks as given."""
    import stagelab.run.trial as trial_module
    from stagelab.core.trial_spec import TrialSpec
    from stagelab.measure.results import ResourceReport
    from test_trial import STAGE, fake_build

    session = trial_module.load_session(STAGE, [TrialSpec.of(defines={"ROWS_PER_BLOCK": v}, name=f"rows{v}")
                                                for v in ("1", "2")])
    for measured, name in [(session.default, "default"), *((t.measured, t.spec.name) for t in session.trials)]:
        measured.build = fake_build(tmp_path, name)
        measured.resources = ResourceReport([], [], [])
    if kind_checks is not None:
        monkeypatch.setattr(type(session.ctx.family), "kind_checks", lambda self, kind: kind_checks)
    return session


def _reports(names):
    from stagelab.measure.checks import CheckResult
    from stagelab.measure.results import CheckReport

    ok = CheckResult("1x1", False, "float16", 0, 0.0, 0.0, 0.0, 1.0, 0.0, 0, 0.0, True, "ok")
    return {name: CheckReport([ok]) for name in names}


def test_a_trial_session_checks_its_builds_in_one_pass(monkeypatch, tmp_path):
    import stagelab.measure.steps as steps
    from stagelab.run.trial import check_trials

    session = _session(monkeypatch, tmp_path)
    passes = []
    monkeypatch.setattr(steps, "shared_check_step", lambda entries: passes.append(list(entries)) or _reports(entries))
    monkeypatch.setattr(steps, "check_step", lambda ctx, built: pytest.fail("checked one at a time"))
    lines = []
    check_trials(session, progress=lines.append)
    assert passes == [["default", "rows1", "rows2"]]
    assert all(m.checks.passed for m in [session.default, *(t.measured for t in session.trials)])
    assert "[check] rows2: checks 1/1 ok" in lines


def test_a_family_with_its_own_checks_for_the_inputs_checks_one_build_at_a_time(monkeypatch, tmp_path):
    import stagelab.measure.steps as steps
    from stagelab.run.trial import check_trials

    session = _session(monkeypatch, tmp_path, kind_checks=lambda *a, **k: [])
    monkeypatch.setattr(steps, "shared_check_step", lambda entries: pytest.fail("shared a kind's own checks"))
    checked = []
    monkeypatch.setattr(steps, "check_step", lambda ctx, built: checked.append(ctx.stage.id) or _reports(["x"])["x"])
    check_trials(session, progress=lambda line: None)
    assert len(checked) == 3


def test_a_build_that_hangs_in_the_pass_is_the_one_that_crashed(monkeypatch, tmp_path):
    import stagelab.measure.steps as steps
    from stagelab.run.trial import check_trials

    session = _session(monkeypatch, tmp_path)
    hang = KernelHang("check 1x1 float16 seed 0", 30.0, 20.0)

    def aborting(entries):
        raise CheckAborted("rows2", hang)

    monkeypatch.setattr(steps, "shared_check_step", aborting)
    with pytest.raises(KernelHang):
        check_trials(session, progress=lambda line: None)
    crashed = {t.spec.name: t.measured.crash for t in session.trials}
    assert crashed["rows2"].startswith("KernelHang: check 1x1") and not crashed["rows1"]
    assert session.default.checks is None and not session.default.crash
