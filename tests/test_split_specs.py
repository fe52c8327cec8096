"""tools/split_specs.py: device_run.sh's TRY list splits at ';' outside quotes only."""

import subprocess
import sys
from pathlib import Path

import pytest
from tool_module import load_tool

TOOL = Path(__file__).resolve().parents[1] / "tools" / "split_specs.py"


@pytest.fixture(scope="module")
def tool():
    return load_tool("split_specs")


def test_a_quoted_hypothesis_keeps_its_semicolon(tool):
    text = "s13 --define A=1 --hypothesis 'pairs balance to 0.97; the snake to 1.00';s16 --define B=2"
    assert tool.split_specs(text) == ["s13 --define A=1 --hypothesis 'pairs balance to 0.97; the snake to 1.00'",
                                      "s16 --define B=2"]


def test_blank_specs_go_and_double_quotes_count_too(tool):
    assert tool.split_specs(' ; s1 --hypothesis "a; b" ;; ') == ['s1 --hypothesis "a; b"']
    assert tool.split_specs("") == []


def test_an_unbalanced_quote_is_an_error_naming_it(tool):
    with pytest.raises(SystemExit, match="unbalanced '"):
        tool.split_specs("s13 --hypothesis 'never closed")


def test_the_cli_prints_the_specs_nul_separated():
    out = subprocess.run([sys.executable, str(TOOL), "a 'x;y';b"], capture_output=True, text=True, check=True).stdout
    assert out == "a 'x;y'\0b\0"
