"""The sdpa family's problems beyond plain attention (issue 31): grouped-query attention, a key length
apart from the query length (causal aligned bottom-right) and strided bshd inputs; params/models.yaml;
and stages that do not take such a problem skipping it before any launch."""

from types import SimpleNamespace

import pytest
import torch

from stagelab.measure.family_checks import check_shape
from stagelab.core.errors import ConfigError, InputError
from stagelab.families.sdpa import FAMILY, Shape
from stagelab.families.sdpa.contenders import sdpa_arguments, sdpa_output
from stagelab.families.sdpa.kernel import StageKernel, tensor_layout
from stagelab.families.sdpa.reference import attention, causal_mask, default_scale
from stagelab.core.distributions import input_generator
from stagelab.core.supports import declared_supports, require_supports, split_supported
from stagelab.judge.outcome import Evidence, decide
from stagelab.core.params import load_params
from stagelab.core.paths import repo_root
from stagelab.core.registry import family_registry, load_registry

CACHED_PREFIX = Shape(1, 4, 24, 64, True, kv_heads=2, kv_seq_len=40)  # GQA, Sq < Sk, causal


def parse(entry: dict) -> list[Shape]:
    return FAMILY.parse_problem("shapes[0]", entry)


# -- parsing and validation -------------------------------------------------------------------

def test_plain_entries_parse_as_before_with_their_old_tags_flops_and_bytes():
    plain, causal = parse({"shape": [2, 8, 512, 64], "causal": [False, True]})
    assert (plain.tag, causal.tag) == ("2x8x512x64", "2x8x512x64_causal")
    assert plain == Shape(2, 8, 512, 64, False) and plain.features == ()
    full = 4.0 * 2 * 8 * 512 * 512 * 64
    assert (plain.flops(), causal.flops()) == (full, full / 2)
    assert plain.bytes_moved(2) == 4.0 * 2 * 8 * 512 * 64 * 2


def test_plain_inputs_are_drawn_from_the_key_of_earlier_runs():
    shape = Shape(1, 2, 16, 64, True)
    q, k, v = FAMILY.make_inputs(shape, torch.float32, 3, "cpu")
    generator = input_generator((3, shape.dims, shape.causal))
    expected = [torch.randn(shape.dims, generator=generator) for _ in range(3)]
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), expected))


def test_new_keys_append_to_the_tag_and_count_in_flops_and_bytes():
    (shape,) = parse({"name": "llama3-8b-cached", "shape": [1, 32, 512, 128], "kv_heads": 8, "kv_seq_len": 4096,
                      "causal": True, "layout": "bshd"})
    assert shape.tag == "llama3-8b-cached_1x32x512x128_causal_kv8_sk4096_bshd"
    assert shape.features == ("gqa", "cross_length", "bshd")
    assert (shape.dims, shape.kv_dims, shape.group) == ((1, 32, 512, 128), (1, 8, 4096, 128), 4)
    # causal bottom-right: query i sees 3584 + i + 1 keys; the continuous count is Sq * Sk - Sq^2 / 2
    assert shape.flops() == 4.0 * 32 * (512 * 4096 - 512 * 512 / 2) * 128
    assert shape.bytes_moved(2) == 2.0 * (32 * 512 * 128 + 8 * 4096 * 128) * 2


@pytest.mark.parametrize("entry, message", [
    ({"shape": [1, 6, 8, 64], "kv_heads": 4}, "kv_heads: 4 does not divide heads 6"),
    ({"shape": [1, 6, 8, 64], "kv_heads": 0}, "shapes[0].kv_heads: expected a positive integer"),
    ({"shape": [1, 6, 8, 64], "kv_seq_len": True}, "kv_seq_len: expected a positive integer"),
    ({"shape": [1, 2, 8, 64], "kv_seq_len": 4, "causal": True}, "leaves the first 4 queries no key"),
    ({"shape": [1, 2, 8, 64], "layout": "sbhd"}, "layout: 'sbhd' is not supported; supported: ['bhsd', 'bshd']"),
    ({"shape": [1, 2, 8, 64], "name": "ViT-B/16"}, "name: 'ViT-B/16' must be"),
    ({"shape": [1, 2, 8, 64], "name": "vit_b16"}, "name: 'vit_b16' must be"),
    ({"shape": [1, 2, 8, 64], "name": 16}, "name: expected a string"),
    ({"shape": [1, 2, 8, 96]}, "shape.head_dim: 96 is not supported"),
    ({"shape": [1, 2, 8, 64], "kv_head": 1}, "unknown key(s) ['kv_head']"),
])
def test_bad_entries_name_the_key(entry, message):
    with pytest.raises(ConfigError) as err:
        parse(entry)
    assert message in str(err.value) and str(err.value).startswith("shapes[0]")


def test_a_cross_length_without_causal_may_be_shorter():
    (shape,) = parse({"shape": [2, 10, 4096, 64], "kv_seq_len": 77})
    assert shape.features == ("cross_length",) and shape.tag == "2x10x4096x64_sk77"


def test_models_yaml_parses_and_names_every_problem():
    params = load_params(repo_root() / "params" / "models.yaml")
    problems = params.timed_shapes()
    assert all(p.name for p in problems), [p.tag for p in problems if not p.name]
    assert all(p.tag.startswith(p.name + "_") for p in problems)
    assert {p.head_dim for p in problems} == {64, 128}
    needed = {feature for p in problems for feature in p.features}
    assert needed == {"gqa", "cross_length", "bshd"}
    assert params.mission.features == (), "the mission is timed by every stage, so it needs nothing more"
    assert params.mission in params.shapes, "the mission is checked too"
    assert len({p.tag for p in problems}) == len(problems)


# -- the reference ----------------------------------------------------------------------------

def inputs_of(shape: Shape, seed: int = 0, distribution: str = "normal"):
    return FAMILY.make_inputs(shape, torch.float64, seed, "cpu", distribution)


def test_grouped_query_reference_equals_the_reference_with_kv_heads_repeated():
    q, k, v = inputs_of(CACHED_PREFIX)
    grouped = FAMILY.reference(CACHED_PREFIX, (q, k, v), torch.float64)
    k_rep, v_rep = (t.repeat_interleave(CACHED_PREFIX.group, dim=1) for t in (k, v))
    assert torch.equal(grouped, attention(q, k_rep, v_rep, default_scale(64), True, torch.float64))
    # not trivially so: pairing query heads with K/V heads the other way round changes the answer
    k_tiled, v_tiled = (t.repeat(1, CACHED_PREFIX.group, 1, 1) for t in (k, v))
    assert not torch.allclose(grouped, attention(q, k_tiled, v_tiled, default_scale(64), True, torch.float64))


def test_causal_mask_is_aligned_bottom_right():
    mask = causal_mask(3, "cpu", 5)  # True = masked
    assert mask.tolist() == [[False, False, False, True, True],
                             [False, False, False, False, True],
                             [False, False, False, False, False]]
    assert torch.equal(causal_mask(4, "cpu", 4), torch.ones(4, 4, dtype=torch.bool).triu(1))


def test_with_fewer_queries_the_last_sees_every_key_and_query_i_sees_keys_up_to_i_plus_sk_minus_sq():
    shape = Shape(1, 2, 6, 64, True, kv_seq_len=10)
    q, k, v = inputs_of(shape)
    causal = attention(q, k, v, default_scale(64), True, torch.float64)
    full = attention(q, k, v, default_scale(64), False, torch.float64)
    assert torch.allclose(causal[:, :, -1], full[:, :, -1])
    offset = shape.kv_seq_len - shape.seq_len
    for i in range(shape.seq_len):
        changed = v.clone()
        changed[:, :, i + offset + 1:] += 100  # keys after what query i sees
        assert torch.equal(attention(q, k, changed, default_scale(64), True, torch.float64)[:, :, i], causal[:, :, i])
        changed = v.clone()
        changed[:, :, i + offset] += 100  # the last key it sees
        assert not torch.allclose(attention(q, k, changed, default_scale(64), True, torch.float64)[:, :, i],
                                  causal[:, :, i])


def test_bshd_inputs_are_strided_views_with_the_values_of_their_bhsd_twin():
    bshd = Shape(2, 4, 24, 64, True, kv_heads=2, kv_seq_len=40, layout="bshd")
    views, plain = inputs_of(bshd), inputs_of(Shape(2, 4, 24, 64, True, kv_heads=2, kv_seq_len=40))
    for view, twin in zip(views, plain):
        assert not view.is_contiguous() and view.transpose(1, 2).is_contiguous()  # [B, S, H, D] memory
        assert tensor_layout(view) == "bshd" and torch.equal(view, twin)
    assert torch.equal(FAMILY.reference(bshd, views, torch.float64), FAMILY.reference(bshd, plain, torch.float64))
    assert tensor_layout(FAMILY.new_output(bshd, views)) == "bshd"  # the output keeps the model's layout


@pytest.mark.parametrize("distribution", FAMILY.distributions)
def test_every_distribution_draws_grouped_cross_length_bshd_inputs(distribution):
    shape = Shape(1, 4, 24, 64, True, kv_heads=2, kv_seq_len=40, layout="bshd")
    q, k, v = FAMILY.make_inputs(shape, torch.float16, 1, "cpu", distribution)
    assert (tuple(q.shape), tuple(k.shape), tuple(v.shape)) == (shape.dims, shape.kv_dims, shape.kv_dims)
    assert all(tensor_layout(t) == "bshd" for t in (q, k, v))
    ref = FAMILY.reference(shape, (q, k, v), torch.float64)
    assert torch.isfinite(ref).all()


def test_peaky_picks_a_key_each_query_may_see_under_the_bottom_right_mask():
    shape = Shape(1, 4, 24, 64, True, kv_heads=2, kv_seq_len=40)
    q, k, _ = inputs_of(shape, distribution="peaky")
    k_rep = k.repeat_interleave(shape.group, dim=1)
    scores = (q @ k_rep.transpose(-1, -2) * default_scale(64)).masked_fill(causal_mask(24, "cpu", 40), float("-inf"))
    assert (torch.softmax(scores, -1).amax(-1) > 0.999).all()  # one visible key holds each row


def test_zero_head_zeroes_a_kv_head_under_grouped_query_attention():
    shape = Shape(2, 4, 24, 64, False, kv_heads=2)
    _, k, v = inputs_of(shape, distribution="zero_head")
    zero_heads = [(b, h) for b in range(2) for h in range(2) if not k[b, h].any() and not v[b, h].any()]
    assert len(zero_heads) == 1


# -- the checks and the library contenders ----------------------------------------------------

def top_left_kernel(q, k, v, out, scale, causal):
    """A planted bug: torch's `is_causal`, aligned top-left, where the lengths differ."""
    import torch.nn.functional as F

    result = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, scale=scale,
                                            enable_gqa=k.shape[1] != q.shape[1])
    out.copy_(result)


def bottom_right_kernel(q, k, v, out, scale, causal):
    out.copy_(sdpa_output("math", q.float(), k.float(), v.float(), scale, causal))


def test_a_top_left_causal_kernel_fails_the_check_where_the_lengths_differ():
    wrong = check_shape(FAMILY, top_left_kernel, CACHED_PREFIX, "float16", 0, "cpu")
    assert not wrong.passed and "over budget" in wrong.reason
    assert check_shape(FAMILY, bottom_right_kernel, CACHED_PREFIX, "float16", 0, "cpu").passed
    equal_lengths = Shape(1, 4, 24, 64, True, kv_heads=2)
    assert check_shape(FAMILY, top_left_kernel, equal_lengths, "float16", 0, "cpu").passed


@pytest.mark.parametrize("shape", [CACHED_PREFIX, Shape(1, 4, 33, 128, False, kv_seq_len=77, layout="bshd"),
                                   Shape(2, 4, 24, 64, True, kv_heads=1, layout="bshd")])
def test_torch_sdpa_contender_computes_the_family_problem(shape):
    q, k, v = inputs_of(shape)
    out = sdpa_output("math", q, k, v, default_scale(shape.head_dim), shape.causal)
    assert torch.allclose(out, FAMILY.reference(shape, (q, k, v), torch.float64), atol=1e-12)


def test_sdpa_gets_a_lower_right_mask_only_where_the_lengths_differ():
    q, k, _ = inputs_of(CACHED_PREFIX)
    arguments = sdpa_arguments(q, k, True)
    assert arguments["enable_gqa"] and "is_causal" not in arguments
    assert sdpa_arguments(q, q, True) == {"is_causal": True}


# -- stages refuse what they do not declare ---------------------------------------------------

class RecordingModule:
    """A stand-in for a built stage module: records what reaches the launch; a stage without launch plans."""

    def __init__(self):
        self.launched = []

    def forward(self, q, k, v, out, scale, causal, stream):
        self.launched.append(tuple(q.shape))

    def launch_plans(self):
        return []

    def last_launch_plan(self):
        return ""


def test_a_stage_kernel_refuses_an_undeclared_problem_before_launch():
    module = RecordingModule()
    kernel = StageKernel(module, "s_test")
    q, k, v = (t.half() for t in inputs_of(CACHED_PREFIX))
    with pytest.raises(InputError, match=r"does not take .*gqa: grouped-query.*cross_length.*lists none"):
        kernel.into(q, k, v, torch.empty_like(q), 0.125, True)
    assert module.launched == []


def test_a_general_stage_refuses_causal_with_fewer_keys_than_queries_before_launch():
    module = RecordingModule()
    kernel = StageKernel(module, "s_test", ("cross_length",))
    q, k, v = (torch.zeros(1, 2, n, 64, dtype=torch.half) for n in (8, 4, 4))
    with pytest.raises(InputError, match="the first 4 queries would see no key"):
        kernel.into(q, k, v, torch.empty_like(q), 0.125, True)
    assert module.launched == []


def test_every_registered_stage_declares_known_features():
    for stage_id, stage in family_registry("sdpa").stages.items():
        assert declared_supports(FAMILY, stage_id) == stage.supports


def test_supports_is_validated(tmp_path):
    (tmp_path / "binding.cpp").write_text("")
    (tmp_path / "a.cu").write_text("")
    (tmp_path / "stages.yaml").write_text("family: sdpa\nstages:\n  - {id: a, supports: gqa}\n")
    with pytest.raises(ConfigError, match=r"stage a\.supports: expected a list"):
        load_registry(tmp_path / "stages.yaml")
    with pytest.raises(ConfigError, match=r"\['paged'\] are not problem features of the sdpa family"):
        require_supports(FAMILY, "stage a", ["gqa", "paged"])


def test_split_supported_keeps_the_order_and_gives_each_skip_its_reason():
    plain, bshd = Shape(1, 2, 8, 64, False), Shape(1, 2, 8, 64, False, layout="bshd", name="m")
    taken, skipped = split_supported(FAMILY, [bshd, plain, CACHED_PREFIX], ())
    assert taken == [plain]
    assert set(skipped) == {bshd.tag, CACHED_PREFIX.tag}
    assert "bshd: strided [batch, seq_len, heads, head_dim] inputs" in skipped[bshd.tag]
    assert split_supported(FAMILY, [bshd, plain], ("bshd",)) == ([bshd, plain], {})


def stage_context(supports=(), shapes=()):
    from stagelab.core.params import RunParams
    from stagelab.core.timing_spec import TimingSpec

    params = RunParams(path=repo_root() / "params" / "x.yaml", description="", family=FAMILY, dtypes=("float16",),
                       seeds=(0, 1), shapes=tuple(shapes), mission=shapes[0],
                       timing=TimingSpec("float16", 0, 100, ("cold",), ()))
    stage = SimpleNamespace(id="s_test", input_kind="", supports=tuple(supports))
    registry = SimpleNamespace(get=lambda stage_id: stage)
    return SimpleNamespace(params=params, family=FAMILY, stage=stage, registry=registry, device=torch.device("cpu"))


def test_a_stage_run_records_skipped_problems_and_checks_the_others():
    from stagelab.measure.steps import check_step

    plain, bshd = Shape(1, 2, 8, 64, False), Shape(1, 2, 16, 64, False, layout="bshd")
    module = RecordingModule()
    module.stage_config = lambda: ""
    report = check_step(stage_context(shapes=[plain, bshd, CACHED_PREFIX]), SimpleNamespace(stage=SimpleNamespace(
        module=module)))
    assert set(report.skipped) == {bshd.tag, CACHED_PREFIX.tag}
    assert {r.shape for r in report.results} == {plain.tag}  # checked (here it fails: no GPU), never skipped
    assert [c.problem for c in report.chains] == [plain.tag]
    assert all(shape == plain.dims for shape in module.launched)  # nothing of a skipped problem launched


def test_timing_leaves_out_the_builds_that_do_not_take_a_problem():
    from stagelab.measure.steps import _builds_taking

    ctx = stage_context(shapes=[CACHED_PREFIX])
    build = SimpleNamespace(module=RecordingModule(), stage_id="s_test")
    skipped = {}
    assert _builds_taking(ctx, {"s_test": build, "parent:x": None}, CACHED_PREFIX, skipped) == {}
    assert list(skipped) == [f"s_test/{CACHED_PREFIX.tag}"] and "gqa" in skipped[f"s_test/{CACHED_PREFIX.tag}"]
    ctx.stage.supports = ("gqa", "cross_length")
    assert _builds_taking(ctx, {"s_test": build}, CACHED_PREFIX, {}) == {"s_test": build}


def test_a_run_whose_every_problem_was_skipped_is_an_error_not_incorrect():
    outcome = decide(Evidence(built=True, gates_passed=True, gpu_available=True, checks_passed=None,
                              checks_skipped=3))
    assert outcome.outcome == "error" and "takes none of the 3 problems" in outcome.reason


def test_an_exploration_sweep_refuses_an_undeclared_problem_before_launch():
    from stagelab.explore import stage_call

    module = RecordingModule()
    bshd = Shape(1, 2, 8, 64, False, layout="bshd")
    with pytest.raises(InputError, match="bshd: strided"):
        stage_call(FAMILY, StageKernel(module, "s_test"), bshd, FAMILY.make_inputs(bshd, torch.float16, 0, "cpu"))
    assert module.launched == []


def test_show_sweep_tabulates_and_charts_one_group_of_bars_per_contender(capsys):
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from stagelab.explore import show_sweep

    rows = pd.DataFrame({"shape": ["a", "b", "a", "b"], "contender": ["default", "default", "knob", "knob"],
                         "p50_us": [1.0, 2.0, 3.0, 4.0]})
    axes = show_sweep(rows, value="p50_us", title="t")
    assert "knob" in capsys.readouterr().out  # the table, shape by contender
    assert axes.get_ylabel() == "p50 µs" and axes.get_title() == "t"
    assert [label.get_text() for label in axes.get_xticklabels()] == ["default", "knob"]
