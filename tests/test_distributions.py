"""Named input distributions: each has its defining property, the parameter file chooses them, and
the checker, on them, fails kernels that are wrong only on some inputs (CPU stand-ins for kernels)."""

import math

import pytest
import torch

from stagelab.core import metrics as m
from stagelab.measure.checks import CheckResult, ErrorBudget, LaunchVerdict, check_each
from stagelab.measure.family_checks import check_all
from stagelab.core.errors import ConfigError
from stagelab.families.sdpa import FAMILY as SDPA, FP8_INPUTS, Shape, attention
from stagelab.families.sdpa import distributions as sdpa_dist
from stagelab.families.sdpa.fp8 import check_fp8_all, emulate_fp8_attention, quantized_probabilities
from stagelab.families.sdpa.fp8.emulation import flat_e4m3_operands, per_head
from stagelab.families.sdpa.reference import causal_mask
from stagelab.families.softmax import FAMILY as SOFTMAX, Rows, plain_softmax
from stagelab.families.softmax import distributions as softmax_dist
from stagelab.core.distributions import DEFAULT_DISTRIBUTION, stage_distributions
from stagelab.record.flatten import check_metrics
from stagelab.judge.judge import judge
from stagelab.core.params import load_params
from stagelab.core.paths import repo_root
from stagelab.measure.results import CheckReport, StageResults

# Odd lengths (partial tiles), causal and not, both head dims, one and several heads.
SHAPES = [Shape(1, 2, 77, 64, True), Shape(1, 3, 77, 64, False), Shape(2, 1, 33, 128, True)]
DTYPES = ["float16", "bfloat16"]
FP16_KIND = ""
PROPERTY_SHAPE = Shape(2, 4, 512, 64, True)  # enough elements for the statistics below


def inputs(name, shape=PROPERTY_SHAPE, dtype=torch.float16, seed=0):
    return SDPA.make_inputs(shape, dtype, seed, "cpu", name)


def logits(q, k, causal):
    """q.k / sqrt(d) in float64, masked entries left out (NaN)."""
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    return scores.masked_fill(causal_mask(q.shape[2], "cpu"), math.nan) if causal else scores


# -- each distribution's defining property -------------------------------------------------------
def test_normal_is_the_inputs_of_earlier_runs():
    """A parameter file without `distributions` checks exactly what it checked before they had names."""
    shape = SHAPES[0]
    generator = torch.Generator(device="cpu").manual_seed(hash((5, shape.dims, shape.causal)) & (2**63 - 1))
    before = [torch.randn(shape.dims, generator=generator, dtype=torch.float32).half() for _ in range(3)]
    for now in (SDPA.make_inputs(shape, torch.float16, 5, "cpu"), inputs("normal", shape, seed=5)):
        assert all(torch.equal(a, b) for a, b in zip(before, now))
    generator = torch.Generator(device="cpu").manual_seed(hash((5, 7, 33)) & (2**63 - 1))
    x_before = (torch.randn((7, 33), generator=generator) * softmax_dist.INPUT_SPREAD).half()
    assert torch.equal(x_before, SOFTMAX.make_inputs(Rows(7, 33), torch.float16, 5, "cpu")[0])


@pytest.mark.parametrize("head_dim", [64, 128])
def test_large_has_logits_and_v_in_the_hundreds(head_dim):
    shape = Shape(1, 4, 512, head_dim, False)
    q, k, v = inputs("large", shape)
    spread = logits(q, k, False).std().item()
    assert 100 < spread < 1000 and spread == pytest.approx(sdpa_dist.LARGE_LOGIT_STD, rel=0.1)
    assert 100 < v.double().std().item() < 1000
    # the plain fp16 yardstick, which forms q.k before the scale, stays finite
    assert torch.isfinite(attention(q, k, v, 1 / math.sqrt(head_dim), False, torch.float16)).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_positive_is_all_positive_and_at_most_one(dtype):
    for t in inputs("positive", dtype=dtype):
        assert (t > 0).all() and (t <= 1).all()
        assert t.double().mean().item() == pytest.approx(0.5, abs=0.01)  # uniform, not a constant


@pytest.mark.parametrize("shape", [PROPERTY_SHAPE, Shape(1, 2, 333, 128, False), Shape(1, 1, 4097, 64, True)])
def test_peaky_rows_are_near_one_hot(shape):
    q, k, _ = inputs("peaky", shape)
    scores = logits(q, k, shape.causal)
    probabilities = torch.softmax(scores.nan_to_num(nan=-math.inf), dim=-1)
    assert probabilities.amax(-1).min().item() > 0.999
    assert scores.nan_to_num(nan=0).abs().max().item() < 100  # tens, not `large`'s hundreds


def zero_heads(t):
    return {tuple(i) for i in torch.nonzero(t.flatten(-2).abs().amax(-1) == 0).tolist()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_zero_head_zeroes_one_head_of_k_and_v_only(seed):
    q, k, v = inputs("zero_head", seed=seed)
    assert len(zero_heads(k)) == 1 and zero_heads(k) == zero_heads(v)
    assert not zero_heads(q) and (q != 0).any(-1).all()
    last = (PROPERTY_SHAPE.batch - 1, PROPERTY_SHAPE.heads - 1)
    assert zero_heads(k) != {last}  # the FP8 check zeroes the last head itself: both cases are met
    assert zero_heads(inputs("zero_head", Shape(1, 1, 9, 64, False))[1]) == {(0, 0)}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tiny_is_around_1e_minus_3(dtype):
    for t in inputs("tiny", dtype=dtype):
        assert 0.5e-3 < t.double().std().item() < 2e-3 and t.abs().max().item() < 1e-2


def test_outlier_has_a_few_k_and_v_channels_100x_the_rest():
    q, k, v = inputs("outlier")
    for t, expected in ((q, 0), (k, sdpa_dist.OUTLIER_CHANNELS), (v, sdpa_dist.OUTLIER_CHANNELS)):
        rms = t.double().square().mean(dim=(0, 1, 2)).sqrt()
        assert int((rms > 30 * rms.median()).sum()) == expected
    k_rms = k.double().square().mean(dim=(0, 1, 2)).sqrt()
    assert k_rms.max() / k_rms.median() == pytest.approx(sdpa_dist.OUTLIER_FACTOR, rel=0.2)


@pytest.mark.parametrize("name", SDPA.distributions)
def test_inputs_are_fresh_per_seed_and_distribution(name):
    a = inputs(name, seed=0)
    assert all(torch.equal(x, y) for x, y in zip(a, inputs(name, seed=0)))
    assert all(not torch.equal(x, y) for x, y in zip(a, inputs(name, seed=1)))
    others = [d for d in SDPA.distributions if d != name]
    assert all(not torch.equal(a[1], inputs(d)[1]) for d in others)


def test_softmax_distributions_have_their_properties():
    problem = Rows(64, 4097)
    large, positive, peaky, tiny = (SOFTMAX.make_inputs(problem, torch.float16, 0, "cpu", d)[0]
                                    for d in ("large", "positive", "peaky", "tiny"))
    assert 100 < large.double().std().item() < 1000
    assert (positive > 0).all() and (positive <= 1).all()
    assert plain_softmax(peaky, torch.float64).amax(-1).min().item() > 0.999
    assert 0.5e-3 < tiny.double().std().item() < 2e-3
    assert set(SOFTMAX.distributions) == {"normal", "large", "positive", "peaky", "tiny"}
    with pytest.raises(ConfigError, match="softmax family has no input distribution 'zero_head'"):
        SOFTMAX.make_inputs(problem, torch.float16, 0, "cpu", "zero_head")


# -- the parameter file chooses them -------------------------------------------------------------
def write(tmp_path, text, family_header="shapes: [{shape: [1, 2, 3, 64]}]\n"):
    path = tmp_path / "p.yaml"
    path.write_text(family_header + text)
    return path


def test_default_is_normal_alone(tmp_path):
    assert load_params(write(tmp_path, "")).distributions == (DEFAULT_DISTRIBUTION,)
    assert load_params(repo_root() / "params" / "smoke.yaml").distributions == ("normal",)


def test_acceptance_files_run_every_distribution_of_their_family():
    assert load_params(repo_root() / "params" / "acceptance.yaml").distributions == SDPA.distributions
    assert load_params(repo_root() / "params" / "softmax-acceptance.yaml").distributions == SOFTMAX.distributions


@pytest.mark.parametrize("text, message", [
    ("distributions: [normal, huge]\n", "'huge' is not supported; supported: ['normal', 'large', 'positive', "
                                        "'peaky', 'zero_head', 'tiny', 'outlier']"),
    ("distributions: []\n", "distributions: expected a non-empty list"),
    ("distributions: [large, large]\n", "['large'] listed more than once"),
    ("distributions: {large: 1}\n", "expected a non-empty list"),
])
def test_bad_distributions_are_named(tmp_path, text, message):
    with pytest.raises(ConfigError) as err:
        load_params(write(tmp_path, text))
    assert message in str(err.value) and "p.yaml: distributions" in str(err.value)


def test_a_distribution_another_family_lacks_is_named(tmp_path):
    path = write(tmp_path, "distributions: [normal, zero_head]\n",
                 family_header="family: softmax\nshapes: [{shape: [2, 3]}]\nmission: {shape: [2, 3]}\n")
    with pytest.raises(ConfigError, match=r"'zero_head' is not supported; supported: \['normal', 'large', "
                                          r"'positive', 'peaky', 'tiny'\] \(the softmax family"):
        load_params(path)


def test_outlier_applies_to_fp8_stages_only():
    assert stage_distributions(SDPA, SDPA.distributions, FP8_INPUTS) == SDPA.distributions
    assert stage_distributions(SDPA, SDPA.distributions, FP16_KIND) == tuple(
        d for d in SDPA.distributions if d != "outlier")
    with pytest.raises(ConfigError, match="no input distribution 'huge'"):
        stage_distributions(SDPA, ["normal", "huge"])


# -- the checker on them -------------------------------------------------------------------------
def correct(q, k, v, out, scale, causal):
    out.copy_(attention(q, k, v, scale, causal, torch.float32))


def masked_scores(q, k, scale, causal):
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    return scores.masked_fill(causal_mask(q.shape[2], "cpu"), -math.inf) if causal else scores


def no_max_subtraction(q, k, v, out, scale, causal):
    """Softmax as exp(s) / sum(exp(s)) in float32: exact in exact arithmetic, but exp overflows
    once logits pass 88."""
    weights = masked_scores(q, k, scale, causal).exp()
    out.copy_((weights / weights.sum(-1, keepdim=True)) @ v.float())


def stale_max(q, k, v, out, scale, causal):
    """The row max of the first 16 keys only, as a kernel that never updates its running max:
    softmax is shift-invariant, so only the exponent range tells."""
    scores = masked_scores(q, k, scale, causal)
    first_tile_max = scores[..., :16].amax(-1, keepdim=True)
    shift = torch.where(torch.isinf(first_tile_max), scores.amax(-1, keepdim=True), first_tile_max)
    weights = (scores - shift).exp()
    out.copy_((weights / weights.sum(-1, keepdim=True)) @ v.float())


def ratios_by_distribution(results):
    worst = CheckReport(results).worst_by_distribution()
    passed = {d: all(r.passed for r in results if r.distribution == d) for d in worst}
    return worst, passed


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_correct_kernel_passes_every_distribution(dtype):
    names = stage_distributions(SDPA, SDPA.distributions, FP16_KIND)
    results = check_all(SDPA, correct, SHAPES, [dtype], [0, 1], "cpu", distributions=names)
    assert [r.reason for r in results if not r.passed] == []
    assert {r.distribution for r in results} == set(names)
    assert len(results) == len(SHAPES) * 2 * len(names)


def test_a_problems_dtypes_share_one_draw_and_each_check_gets_its_own_copies():
    """check_each puts a problem's dtypes side by side and sdpa draws their float32 inputs once; what a
    check writes into its inputs reaches neither the next check nor the kept draw."""
    shape = SHAPES[1]
    first = sdpa_dist.draw(shape, 3, "peaky")
    assert sdpa_dist.draw(shape, 3, "peaky") is first
    assert sdpa_dist.draw(shape, 4, "peaky") is not first  # another seed is another draw
    mine = SDPA.make_inputs(shape, torch.float32, 3, "cpu", "peaky")
    expected = [t.clone() for t in mine]
    for t in mine:
        t.zero_()
    again = SDPA.make_inputs(shape, torch.float32, 3, "cpu", "peaky")
    assert all(torch.equal(a, b) for a, b in zip(again, expected))
    half = SDPA.make_inputs(shape, torch.float16, 3, "cpu", "peaky")
    assert all(torch.equal(h, e.half()) for h, e in zip(half, expected))


def test_checks_run_a_problems_dtypes_side_by_side():
    order = []

    def check(shape, dtype_name, seed, distribution):
        order.append((shape.seq_len, seed, distribution, dtype_name))
        return correct_check_result(shape, dtype_name, seed, distribution)
    check_each(check, SHAPES[:2], iter(DTYPES), iter([0, 1]), distributions=("normal", "tiny"))
    assert order[:4] == [(77, 0, "normal", "float16"), (77, 0, "normal", "bfloat16"),
                         (77, 0, "tiny", "float16"), (77, 0, "tiny", "bfloat16")]
    assert len(order) == 2 * 2 * 2 * 2  # every combination, the iterators read once each


def correct_check_result(shape, dtype_name, seed, distribution):
    verdict = LaunchVerdict(max_err=0.0, nonfinite=0, run_diff=0.0, reasons=())
    return CheckResult.judged(shape, dtype_name, seed, ErrorBudget(0.01, 0.01), verdict, distribution)


@pytest.mark.parametrize("bug", [no_max_subtraction, stale_max])
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_kernel_wrong_only_on_large_logits_fails_on_large(bug, dtype):
    names = stage_distributions(SDPA, SDPA.distributions, FP16_KIND)
    results = check_all(SDPA, bug, SHAPES, [dtype], [0, 1], "cpu", distributions=names)
    _, passed = ratios_by_distribution(results)
    assert passed == {**{d: True for d in names}, "large": False}
    failed = [r for r in results if not r.passed]
    assert all(r.distribution == "large" and "non-finite" in r.reason for r in failed)


def emulation(fp8, out, scale, causal):
    out.copy_(emulate_fp8_attention(fp8, scale, causal))


def logits_in_bf16(fp8, out, scale, causal):
    """The FP8 emulation with the scaled logits rounded to bf16 (the score scale folded in a half-
    precision multiply): 8 bits of mantissa are plenty for logits of a few units, not for hundreds."""
    q8, k8, v8 = flat_e4m3_operands(fp8)
    score_scale = scale * per_head(fp8.q.descale) * per_head(fp8.k.descale)
    scores = (q8 @ k8.transpose(-1, -2) * score_scale).to(torch.bfloat16).float()
    if causal:
        scores = scores.masked_fill(causal_mask(q8.shape[1], "cpu"), -math.inf)
    p8, row_sum = quantized_probabilities(scores, scores.amax(-1, keepdim=True))
    out.copy_((p8 @ v8 * (per_head(fp8.v.descale) / row_sum)).reshape(out.shape))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp8_checks_run_every_distribution(dtype):
    results = check_fp8_all(emulation, SHAPES, [dtype], [0, 1], "cpu", distributions=SDPA.distributions)
    worst, passed = ratios_by_distribution(results)
    assert all(passed.values()) and set(worst) == set(SDPA.distributions)
    # zero_head on three heads leaves K/V of one head for the check's own zero head: not all zero
    assert worst["zero_head"] > 0
    bug = check_fp8_all(logits_in_bf16, SHAPES, [dtype], [0, 1], "cpu", distributions=SDPA.distributions)
    _, passed = ratios_by_distribution(bug)
    assert not passed["large"] and not passed["outlier"]
    assert passed["normal"] and passed["positive"] and passed["tiny"]


def test_a_failure_names_its_distribution_in_the_outcome_and_the_metrics():
    results = check_all(SDPA, no_max_subtraction, SHAPES[:1], ["float16"], [0], "cpu",
                        distributions=["normal", "large"])
    report = CheckReport(results)
    outcome = judge(StageResults(built=object(), checks=report), gpu_available=True, has_parent=False, min_gain=0)
    assert outcome.outcome == "incorrect"
    assert "large: 1 of 1 checks" in outcome.reason and "normal:" not in outcome.reason
    assert f"{SHAPES[0].tag} float16 seed 0 large:" in outcome.reason
    values = check_metrics(report)
    assert values[m.CHECK_WORST_RATIO.key("normal")] < 1
    assert values[m.CHECK_WORST_RATIO.key("large")] > 1
    assert m.CHECK_WORST_RATIO.key("large") == "check_worst_ratio/large"
    assert report.frame().columns.tolist()[:5] == ["shape", "causal", "dtype", "seed", "distribution"]


def test_unknown_distribution_fails_before_any_launch():
    launched = []

    def kernel(*args):
        launched.append(args)

    with pytest.raises(ConfigError, match="no input distribution 'hug'"):
        check_all(SDPA, kernel, SHAPES[:1], ["float16"], [0], "cpu", distributions=["normal", "hug"])
    with pytest.raises(ConfigError, match="no input distribution 'hug'"):
        check_fp8_all(kernel, SHAPES[:1], ["float16"], [0], "cpu", distributions=["hug"])
    assert launched == []


class OverflowingYardstick(type(SDPA)):
    """sdpa whose plain low-precision attention overflows (as fp16's q.k would on logits of 10^4)."""

    def reference(self, problem, inputs, compute_dtype):
        exact = super().reference(problem, inputs, compute_dtype)
        return exact if compute_dtype == torch.float64 else exact * math.inf


def test_a_non_finite_yardstick_fails_the_check_instead_of_passing_it():
    """A budget of inf or NaN would pass every output (NaN compares false): the check fails, saying why."""
    [result] = check_all(OverflowingYardstick(), correct, SHAPES[1:2], ["float16"], [0], "cpu")
    assert not result.passed and "not finite" in result.reason


@pytest.mark.parametrize("max_err, ratio", [(0.0, 0.0), (1e-3, math.inf)])
def test_a_zero_budget_is_met_only_by_a_zero_error(max_err, ratio):
    """An all-zero exact output (every V zero) has atol 0: a zero error is a ratio of 0, not inf."""
    verdict = LaunchVerdict(max_err, 0, 0.0, () if max_err == 0 else ("over budget",))
    result = CheckResult.judged(SHAPES[0], "float16", 0, ErrorBudget(0.0, 0.0), verdict, "zero_head")
    assert result.err_budget_ratio == ratio and result.distribution == "zero_head"


# -- the results page -----------------------------------------------------------------------------
def test_the_results_page_shows_the_worst_ratio_per_distribution(tmp_store, tmp_path):
    from stagelab.record import tracking
    from stagelab.record.report import write_report

    experiment_id = tracking.init_store("stagelab-sdpa")
    worst = {"s6_tma_warpspec": {"normal": 0.41, "large": 0.77}, "s9_fp8": {"normal": 0.49, "large": 13.5,
                                                                              "outlier": 0.52}}
    for stage, ratios in worst.items():
        run_id = tracking.create_run(experiment_id, stage, "acceptance")
        tracking.set_tags(run_id, {"outcome": "pass", "gpu": "Test GPU 1", "git_commit": "abc1234567"})
        tracking.log_metrics(run_id, {m.MISSION_P50_US.key(): 10.0,
                                      **{m.CHECK_WORST_RATIO.key(d): r for d, r in ratios.items()}})
        tracking.end_run(run_id)
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()
    table = text.split("Worst error / budget per input distribution")[1].split("\n\n")[1]
    header, _, *rows = table.splitlines()
    assert [c.strip() for c in header.strip("|").split("|")] == ["stage", "normal", "large", "outlier"]
    s6 = next(r for r in rows if "s6_tma_warpspec" in r)
    s9 = next(r for r in rows if "s9_fp8" in r)
    assert "0.77" in s6 and s6.rstrip(" |").endswith("–")  # s6 is not checked on outlier
    assert "13.5" in s9 and "0.52" in s9


# -- tools/quick_check.py --distributions ---------------------------------------------------------
