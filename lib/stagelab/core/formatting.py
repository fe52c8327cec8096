"""Numbers for people: every results page, journal, terminal summary and table artifact formats through here.

Never scientific notation (`fixed` and `plain` for numbers quoted in text and CSV cells, `fixed_numbers` for
text an older formatter or a person wrote). A commit reads `g6123e17` (`short_commit`: git describe's `g`), never
6123e17, which reads as a number. Three significant digits; whole numbers at 1000 and above; a value
under 0.01 as `<0.01`. A latency column (µs in its name) reads in µs, or in ms where every value
in it reaches 1000 µs (a column in seconds, `_s`, too); throughputs and clocks (TFLOP/s, GB/s, MHz, W) as
whole numbers from 100 up and with three significant digits below (a tiny problem's TFLOP/s never reads 0);
byte columns in KiB; a dash where there is no value.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import numpy
import pandas as pd

MISSING = "–"
# A number in scientific notation (3.66e+04, 1e-05, 6123e17): not one inside a name (s8e4, a kernel tag's
# digest after its dot, ...W..8611e38319), and a sentence's full stop may follow it.
SCIENTIFIC_RE = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?[eE][-+]?\d+(?!\w|\.\w)")
# Digits and one `e`, no sign, no point, git's abbreviation or longer: a commit (6123e17), not a number a
# formatter wrote (those sign their exponent: 3.66e+04), nor one a person wrote short (1e9).
_COMMIT_LIKE_RE = re.compile(r"\d+e\d+")
_HASH_RE = re.compile(r"g?([0-9a-f]{7,40})")
SHORT_COMMIT = 7  # git's default abbreviation
COMMIT_PREFIX = "g"  # as `git describe` writes a commit (v1.2-3-g6123e17)
FLOAT_EXPONENT_LIMIT = 400  # a token beyond any float's exponent is no number the lab wrote: left as it is
TINY = 0.01  # below this a value reads as "<0.01": its digits say nothing at a table's scale
US_PER_MS = 1000.0
US_PER_S = 1e6
BYTES_PER_KIB = 1024
# Columns shown as whole numbers: a unit in the header, or a metric name's suffix.
INTEGER_UNITS = ("TFLOP/s", "GB/s", "MHz", "(W)")
INTEGER_SUFFIXES = ("tflops", "gbps", "_mhz", "_w")
WHOLE_FROM = 100  # such a column's values from here up read as whole numbers: three digits or more


def fixed(value: float, digits: int = 3) -> str:
    """`digits` significant digits in fixed notation, however large or small: 3.66e+04 reads 36600,
    5.58e-04 reads 0.000558 (for text that quotes a number: a check's reason, a key number)."""
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    return format(Decimal(f"{value:.{digits}g}"), "f")


def short_commit(commit: object) -> str:
    """A commit as the lab writes it for people: `g` and its first SHORT_COMMIT hex digits (g6123e17, as
    `git describe` does), so a hash of digits and one `e` never reads as a number; text that is no hash
    (`unknown`) as it is; no commit at all: `unknown`."""
    if not isinstance(commit, str) or not commit.strip():
        return "unknown"
    found = _HASH_RE.fullmatch(commit.strip())
    return COMMIT_PREFIX + found.group(1)[:SHORT_COMMIT] if found else commit.strip()


def _fixed_token(match: re.Match) -> str:
    token = match.group(0)
    if len(token) >= SHORT_COMMIT and _COMMIT_LIKE_RE.fullmatch(token):
        return COMMIT_PREFIX + token  # a short commit in the text (fixed at 61870e5): g61870e5
    value = Decimal(token)
    if abs(value.adjusted()) > FLOAT_EXPONENT_LIMIT:
        return token
    return format(value, "f")


def fixed_numbers(text: str) -> str:
    """The text with no token that reads as scientific notation: a number (as an older formatter wrote a
    check's reason into the store, or a person a conclusion) in fixed notation with the digits it was
    written with (3.66e+04 reads 36600, 1e-05 0.00001), a short commit (6123e17) as `short_commit` spells
    it (g6123e17); nothing else in the text changes."""
    return SCIENTIFIC_RE.sub(_fixed_token, text)


def scientific_notation(text: str) -> list[str]:
    """Every token of the text that reads as scientific notation (a number, or a commit written bare)."""
    return [match.group(0) for match in SCIENTIFIC_RE.finditer(text)]


def plain(value: float) -> str:
    """Every digit of a float, in fixed notation (1e-05 reads 0.00001): a CSV cell, a table cell as recorded."""
    return numpy.format_float_positional(value, trim="-") if math.isfinite(value) else str(value)


def number(value: float) -> str:
    """Three significant digits, never in scientific notation."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    if abs(value) < TINY:
        return f"<{TINY}" if value > 0 else f">-{TINY}"
    if abs(float(f"{value:.3g}")) >= 1000 or value.is_integer():
        return str(round(Decimal(repr(value))))  # 3.57e+28 reads with its 29 digits, not as 1e+28
    return f"{value:.3g}"  # 0.01 <= |value| < 1000 once rounded: %g keeps fixed notation at 3 digits


def rate(value: float) -> str:
    """A throughput, clock or power: a whole number from WHOLE_FROM up (589 TFLOP/s), three significant
    digits in fixed notation below it, however small (a tiny problem's 0.0123 TFLOP/s never reads 0)."""
    if _missing(value):
        return MISSING
    value = float(value)
    if not math.isfinite(value) or abs(value) >= WHOLE_FROM:
        return f"{value:.0f}" if math.isfinite(value) else str(value)
    return fixed(value)


def latency(us: float) -> str:
    """One latency with its unit: µs below 1000 µs, else ms."""
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return MISSING
    return f"{number(us / US_PER_MS)} ms" if abs(us) >= US_PER_MS else f"{number(us)} µs"


def _is_latency(column: str) -> bool:
    return "µs" in column or column.endswith("_us") or "(us" in column


def _is_seconds(column: str) -> bool:
    return column.endswith("_s")


def _is_bytes(column: str) -> bool:
    return "(B)" in column or column.endswith("_bytes")


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _renamed(name: str, old: str, new: str, old_suffix: str, new_suffix: str) -> str:
    if name.endswith(old_suffix):
        return name.removesuffix(old_suffix) + new_suffix
    return name.replace(old, new)


def _column(name: str, values: list) -> tuple[str, list[str]]:
    """A column's header and its cells as text; a column of anything but numbers is text."""
    if not all(_missing(v) or _is_number(v) for v in values):
        return name, [MISSING if _missing(v) else plain(v) if isinstance(v, float) else str(v) for v in values]
    numbers = [math.nan if _missing(v) else float(v) for v in values]
    if _is_seconds(name):
        name, numbers = name.removesuffix("_s") + "_us", [v * US_PER_S for v in numbers]
    if _is_latency(name):
        present = [v for v in numbers if not math.isnan(v)]
        if present and all(abs(v) >= US_PER_MS for v in present):  # one unit per column
            name = _renamed(name.replace("(us", "(µs"), "µs", "ms", "_us", "_ms")
            numbers = [v / US_PER_MS for v in numbers]
        return name, [number(v) for v in numbers]
    if _is_bytes(name):
        name = _renamed(name, "(B)", "(KiB)", "_bytes", "_kib")
        return name, [number(v / BYTES_PER_KIB) for v in numbers]
    if any(unit in name for unit in INTEGER_UNITS) or name.endswith(INTEGER_SUFFIXES):
        return name, [rate(v) for v in numbers]
    return name, [number(v) for v in numbers]


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every cell as text, formatted by its column (see the module's rules)."""
    columns = {}
    for name in frame.columns:
        header, cells = _column(str(name), frame[name].tolist())
        columns[header] = cells
    return pd.DataFrame(columns, index=frame.index, dtype=object)


def markdown(frame: pd.DataFrame) -> str:
    """A markdown table for people (results pages, terminal summaries, table artifacts)."""
    if frame.empty:
        return frame.to_markdown(index=False)
    return table(frame).to_markdown(index=False, disable_numparse=True)


def csv_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as a CSV of the record writes it: floats with every digit in fixed notation (`plain`),
    text through `fixed_numbers` (a tag a person wrote, `1e9 too long`), gaps left empty."""
    def cell(value):
        if isinstance(value, float):
            return value if math.isnan(value) else plain(value)
        return fixed_numbers(value) if isinstance(value, str) else value
    return frame.map(cell)


def markdown_as_recorded(frame: pd.DataFrame) -> str:
    """A markdown table of the values as recorded, every digit, floats in fixed notation (a table artifact
    beside its CSV; `markdown` is the table for people)."""
    return frame.map(lambda v: plain(v) if isinstance(v, float) else v).to_markdown(index=False, disable_numparse=True)
