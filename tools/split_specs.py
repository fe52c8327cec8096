"""Split a device_run.sh spec list (TRY="spec;spec") at each ';' outside quotes: a spec's quoted
hypothesis may then hold a ';' (an unquoted split cut one in two, and both halves died in `eval`
with "unexpected EOF"). Prints the specs NUL-separated for `mapfile -d ''`.

    mapfile -d '' -t SPECS < <(python3 tools/split_specs.py "$TRY")
"""

from __future__ import annotations

import sys

SEPARATOR = ";"
QUOTES = "'\""


def split_specs(text: str) -> list[str]:
    """The non-blank specs of `text`, split at separators outside single or double quotes."""
    specs, current, quote = [], [], None
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in QUOTES:
            quote = char
        elif char == SEPARATOR:
            specs.append("".join(current))
            current = []
            continue
        current.append(char)
    if quote:
        raise SystemExit(f"split_specs: unbalanced {quote} in {text!r}")
    specs.append("".join(current))
    return [spec.strip() for spec in specs if spec.strip()]


def main(argv: list[str]) -> int:
    text = argv[1] if len(argv) > 1 else ""
    sys.stdout.write("".join(spec + "\0" for spec in split_specs(text)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
