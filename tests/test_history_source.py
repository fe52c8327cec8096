"""The import source of the SDPA stages' trial history (docs/results/sdpa/history/trials.yaml).

The file is transcribed by hand from the s5-s9 header logs and the archive (issue 30); the
trial importer reads it. These checks hold it to the shared schema so that a typo fails here,
not in the importer: the keys and their types, the verdicts, the metrics, the stage ids, the
dates, and s8's trial count the issue asks the journal to show.
"""

import datetime
import numbers
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "results" / "sdpa" / "history" / "trials.yaml"
STAGES = ROOT / "kernels" / "sdpa" / "stages.yaml"

REQUIRED = {
    "stage": str,
    "date": str,
    "name": str,
    "defines": dict,
    "hypothesis": str,
    "verdict": str,
    "conclusion": str,
    "numbers": list,
    "source": str,
}
NULLABLE = {"commit": str, "gpu": str}  # present, a string or null
OPTIONAL = {"session": str, "checks": str, "imported_as": str}
VERDICTS = {"faster", "valid_negative", "incorrect", "build_failed", "resource_fail", "inconclusive"}
METRICS = {"tflops", "us_per_launch", "us", "ratio", "pct", "clocks", "registers", "spill_bytes", "other"}
NUMBER_KEYS = {"problem", "metric", "trial", "default", "clock_mhz", "unit", "quantity", "contenders",
               # what quick_check printed beside the times: the default's clock, board power, and the
               # contenders' clocks and power (README.md here)
               "default_clock_mhz", "power_w", "default_power_w", "contender_clock_mhz", "contender_power_w"}
NULLABLE_NUMBERS = ("default", "clock_mhz", "default_clock_mhz", "power_w", "default_power_w")
PER_CONTENDER = ("contenders", "contender_clock_mhz", "contender_power_w")
# How an entry whose source logged a result without any number says so.
NO_FIGURES = "no figures in the log"
# Issue 30's done-when: `stagelab journal s8_persistent_split` lists at least 40 trials.
MIN_S8_TRIALS = 40


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@pytest.fixture(scope="module")
def entries():
    data = yaml.safe_load(SOURCE.read_text())
    assert isinstance(data, list) and data, f"{SOURCE} must be a non-empty YAML list"
    return data


@pytest.fixture(scope="module")
def stage_ids():
    families = yaml.safe_load(STAGES.read_text())
    found = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("id"), str):
                found.add(node["id"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(families)
    return found


def _where(i, entry):
    return f"entry {i} ({entry.get('stage')}, {entry.get('name')}, {entry.get('date')})"


def test_entries_have_the_schema_keys_and_types(entries):
    for i, entry in enumerate(entries):
        where = _where(i, entry)
        assert isinstance(entry, dict), where
        for key, kind in REQUIRED.items():
            assert isinstance(entry.get(key), kind), f"{where}: {key} must be a {kind.__name__}"
        for key, kind in NULLABLE.items():
            assert key in entry, f"{where}: {key} missing (null when unknown)"
            assert entry[key] is None or isinstance(entry[key], kind), f"{where}: {key}"
        for key, kind in OPTIONAL.items():
            assert key not in entry or isinstance(entry[key], kind), f"{where}: {key}"
        unknown = set(entry) - set(REQUIRED) - set(NULLABLE) - set(OPTIONAL)
        assert not unknown, f"{where}: keys outside the schema {sorted(unknown)}"
        assert entry["hypothesis"].strip() and entry["conclusion"].strip(), where
        for define, value in entry["defines"].items():
            assert isinstance(define, str) and define.isupper(), f"{where}: define {define!r}"
            assert _is_number(value), f"{where}: define {define}={value!r}"


def test_verdicts_are_the_allowed_ones(entries):
    for i, entry in enumerate(entries):
        assert entry["verdict"] in VERDICTS, f"{_where(i, entry)}: verdict {entry['verdict']!r}"


def test_stages_exist_in_the_registry(entries, stage_ids):
    for i, entry in enumerate(entries):
        assert entry["stage"] in stage_ids, f"{_where(i, entry)}: no stage {entry['stage']!r} in {STAGES}"


def test_dates_parse_and_run_in_order(entries):
    dates = []
    for i, entry in enumerate(entries):
        try:
            dates.append(datetime.date.fromisoformat(entry["date"]))
        except ValueError as error:
            pytest.fail(f"{_where(i, entry)}: {error}")
    assert dates == sorted(dates), "entries must be in chronological order"


def test_every_number_is_numeric(entries):
    for i, entry in enumerate(entries):
        where = _where(i, entry)
        for number in entry["numbers"]:
            assert isinstance(number, dict), where
            assert set(number) <= NUMBER_KEYS, f"{where}: {sorted(set(number) - NUMBER_KEYS)}"
            assert isinstance(number.get("problem"), str) and number["problem"], f"{where}: problem"
            assert number.get("metric") in METRICS, f"{where}: metric {number.get('metric')!r}"
            if number["metric"] == "other":
                assert isinstance(number.get("unit"), str), f"{where}: metric other needs a unit"
            assert _is_number(number.get("trial")), f"{where}: trial {number.get('trial')!r}"
            for key in NULLABLE_NUMBERS:
                value = number.get(key)
                assert value is None or _is_number(value), f"{where}: {key} {value!r}"
            for key in PER_CONTENDER:
                for name, value in (number.get(key) or {}).items():
                    assert _is_number(value), f"{where}: {key} {name}={value!r}"


def test_entries_without_numbers_are_failures(entries):
    """A trial without numbers did not build, spilled, hung or failed its checks, or its log gave no
    figures (then its conclusion says so, in the words NO_FIGURES)."""
    unmeasured = {"build_failed", "resource_fail", "incorrect"}
    for i, entry in enumerate(entries):
        if not entry["numbers"]:
            assert entry["verdict"] in unmeasured or NO_FIGURES in entry["conclusion"], (
                f"{_where(i, entry)}: no numbers, verdict {entry['verdict']}, and no '{NO_FIGURES}' in its conclusion")


def test_no_entry_is_transcribed_twice(entries):
    seen = {}
    for i, entry in enumerate(entries):
        key = (entry["stage"], entry["date"], entry["name"], repr(entry["defines"]), repr(entry["numbers"]))
        assert key not in seen, f"{_where(i, entry)} repeats entry {seen[key]}"
        seen[key] = i


def test_s8_has_the_trials_the_journal_needs(entries):
    s8 = [e for e in entries if e["stage"] == "s8_persistent_split"]
    assert len(s8) >= MIN_S8_TRIALS, f"s8 has {len(s8)} trials, the issue asks for {MIN_S8_TRIALS}"
