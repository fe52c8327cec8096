"""same_code.yaml on the results pages: a run of an older source whose code `stagelab same-code` found
unchanged is current, labelled as not re-run; a chain of entries counts; anything else stays stale."""

import pandas as pd
import pytest

from stagelab.core import metrics as m
from stagelab.core.errors import ConfigError
from stagelab.core.family import load_family
from stagelab.core.paths import WORKSPACE_ENV
from stagelab.record import tracking
from stagelab.record.report import write_report
from stagelab.record.same_code_file import SameCode, SameCodeEntry, read_entries, same_code_path, write_entries
from stagelab.record.source_state import (CURRENT, current_source_hashes, is_current, mark_stale, source_states)

NVCC = "Build cuda_13.0.r13.0/compiler.36424714_0"
OTHER_NVCC = "Build cuda_12.8.r12.8/compiler.35583870_0"
VIT = "vit-b16_64x12x197x64"


def entry(stage, before, after, nvcc=NVCC, from_commit="e9b45a46394d", to_commit="2e8fed8f653d"):
    return SameCodeEntry(stage=stage, from_commit=from_commit, from_source_hash=before, to_commit=to_commit,
                         to_source_hash=after, nvcc=nvcc, sass_md5="f76c", kernels=4, device_image_md5="11f9",
                         host_code_md5="45d4", checked="2026-11-28")


def runs(*rows):
    """A frame as mlflow.search_runs gives it: (stage, source hash, commit, nvcc) per run."""
    return pd.DataFrame([{f"tags.{m.TAG_STAGE}": stage, f"tags.{m.TAG_SOURCE_HASH}": source, "tags.git_commit": commit,
                          "tags.nvcc": nvcc} for stage, source, commit, nvcc in rows])


def test_a_chain_of_entries_reaches_the_current_source_both_ways():
    same = SameCode([entry("s8", "A", "B"), entry("s8", "B", "C")])
    assert same.same("s8", "A", "C", NVCC) and same.same("s8", "C", "A", NVCC)
    assert not same.same("s8", "A", "D", NVCC)
    assert not same.same("s9", "A", "C", NVCC)  # entries are per stage


def test_an_entry_counts_only_for_runs_built_by_the_nvcc_that_compiled_both_sides():
    same = SameCode([entry("s8", "A", "B"), entry("s8", "B", "C", nvcc=OTHER_NVCC)])
    assert same.same("s8", "A", "B", NVCC) and not same.same("s8", "A", "B", OTHER_NVCC)
    assert not same.same("s8", "A", "C", NVCC)  # B = C is shown under another compiler only


def test_source_states_label_same_code_runs_current_and_say_they_were_not_re_run():
    current = {"s8": "C", "s9": "Z"}
    same = SameCode([entry("s8", "A", "B"), entry("s8", "B", "C")])
    frame = runs(("s8", "C", "2e8fed8f653d", NVCC), ("s8", "A", "e9b45a46394d", NVCC),
                 ("s8", "A", "e9b45a46394d", OTHER_NVCC), ("s8", "A", "e9b45a46394d", None),
                 ("s8", "Q", "51f3545aaa", NVCC), ("s9", "A", "e9b45a46394d", NVCC), ("gone", "A", "e9b45a4", NVCC))
    states = list(source_states(frame, current, same))
    assert states == [CURRENT, "current (same SASS as ge9b45a4)", "stale (commit ge9b45a4)", "stale (commit ge9b45a4)",
                      "stale (commit g51f3545)", "stale (commit ge9b45a4)", "stale (commit ge9b45a4)"]
    assert [is_current(s) for s in states] == [True, True, False, False, False, False, False]
    # without a record, the older run is stale as before
    assert list(source_states(frame.iloc[:2], current)) == [CURRENT, "stale (commit ge9b45a4)"]


def test_a_same_code_row_is_marked_in_the_tables_beside_the_stale_ones():
    frame = pd.DataFrame({"stage": ["s7", "s8", "s9"]})
    latest = pd.DataFrame({f"tags.{m.TAG_STAGE}": ["s7", "s8", "s9"],
                           "source": [CURRENT, "current (same SASS as ge9b45a4)", "stale (commit g51f3545)"]})
    assert list(mark_stale(frame, latest)["stage"]) == ["s7", "s8 — current (same SASS as ge9b45a4)",
                                                        "s9 — stale (commit g51f3545)"]


def test_entries_round_trip_and_a_new_check_of_the_same_sides_replaces_the_old(tmp_path):
    """By stage, then by the date checked."""
    path = tmp_path / "same_code.yaml"
    write_entries(path, [entry("s8", "A", "B"), entry("s0", "X", "Y")])
    newer = SameCodeEntry(**{**entry("s8", "A", "B").__dict__, "checked": "2026-12-01"})
    assert write_entries(path, [newer, entry("s8", "B", "C")]) == read_entries(path)
    assert [(e.stage, e.sides, e.checked) for e in read_entries(path)] == [
        ("s0", ("X", "Y"), "2026-11-28"), ("s8", ("B", "C"), "2026-11-28"), ("s8", ("A", "B"), "2026-12-01")]
    assert path.read_text().startswith("# Written by `stagelab same-code")


def test_an_entry_from_before_family_python_reads_and_is_written_back_as_it_was(tmp_path):
    """family_python came later (record.same_inputs): older entries lack it, and only an entry that
    says something there is written with it."""
    path = tmp_path / "same_code.yaml"
    write_entries(path, [entry("s0", "X", "Y")])
    def body():
        return path.read_text().split("\nentries:", 1)[1]  # the header names the field
    assert "family_python" not in body() and read_entries(path)[0].family_python == ""
    drawn = SameCodeEntry(**{**entry("s8", "A", "B").__dict__, "family_python": "inputs.py changed on the input path only"})
    write_entries(path, [drawn])
    assert body().count("family_python") == 1 and read_entries(path)[1] == drawn


def test_a_damaged_record_is_an_error_naming_the_file_and_entry(tmp_path):
    path = tmp_path / "same_code.yaml"
    path.write_text("entries:\n- stage: s8\n  from_commit: abc\n")
    with pytest.raises(ConfigError, match=r"same_code.yaml: entry 1: expected the keys \[.*'to_source_hash'"):
        read_entries(path)
    path.write_text("- just a list\n")
    with pytest.raises(ConfigError, match="a list under 'entries'"):
        read_entries(path)
    assert read_entries(tmp_path / "absent.yaml") == []


def test_the_page_shows_a_same_code_run_as_current_and_can_name_it_best(tmp_store, tmp_path, monkeypatch):
    """End to end through write_report: the record is read from the family's results folder."""
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path))  # results_dir: tmp_path/results/sdpa, not the checkout's
    now = current_source_hashes(load_family("sdpa"))
    write_entries(same_code_path("sdpa"), [entry("s8_persistent_split", "an older source", now["s8_persistent_split"])])
    experiment_id = tracking.init_store("stagelab-sdpa")
    for stage, source, p50 in (("s8_persistent_split", "an older source", 9.0), ("s9_fp8", "an older source", 5.0),
                               ("s5_wgmma", now["s5_wgmma"], 20.0)):
        run_id = tracking.create_run(experiment_id, stage, "acceptance")
        tracking.set_tags(run_id, {"outcome": "pass", "gpu": "Test GPU 7", "git_commit": "e9b45a46394d",
                                   m.TAG_SOURCE_HASH: source, "nvcc": NVCC})
        tracking.log_metrics(run_id, {m.MISSION_P50_US.key(): p50, m.P50_US.key(VIT): p50, m.TFLOPS.key(VIT): 100.0})
        tracking.end_run(run_id)
    text = write_report(["acceptance"], out_dir=tmp_path / "pages").read_text()
    best = text.split("### Best stage on acceptance", 1)[1].split("## acceptance", 1)[0]
    assert f"| {VIT}" in best and "s8_persistent_split" in best  # s9 is faster but stale
    ladder = text.split("\n## acceptance", 1)[1]
    assert "current (same SASS as ge9b45a4)" in ladder and "stale (commit ge9b45a4)" in ladder
    assert "s8_persistent_split — current (same SASS as ge9b45a4)" in ladder
