"""Keep the conclusions a journal page still shows but the records lost (docs/results/<family>/conclusions.yaml).

Before `try note` kept its text in the repository, a conclusion lived only in the store it was noted
in; a fresh checkout, importing the records, lost every one noted after its record was taken. The
journal pages written from those stores still show them. This reads a page as committed (a file or
`git show REV:PATH`), finds each entry among the store's trials by its header and run line (the
journal writes both from the run: date, commit, trial, verdict, and the id it had where it ran or the
file it was imported from), and keeps each conclusion the store's copy lacks. Run `stagelab import`
(or this with --apply) afterwards to set them on the runs.

    python tools/recover_conclusions.py --family sdpa --rev HEAD docs/results/sdpa/journal-*.md --apply
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from stagelab.record.conclusions_file import Conclusion, apply_conclusions, conclusions_path, remember  # noqa: E402
from stagelab.record.journal import NO_CONCLUSION, entry_markdown, journal_entries  # noqa: E402

HEADER = re.compile(r"^### \d+\. (?P<rest>.*)$")
CONCLUSION = "- Conclusion: "


def page_entries(text: str) -> dict[tuple[str, str], str]:
    """(header without its number, run line) -> the conclusion as the page shows it, unwrapped."""
    found: dict[tuple[str, str], str] = {}
    for block in re.split(r"(?m)^(?=### )", text):
        lines = block.splitlines()
        header = HEADER.match(lines[0]) if lines else None
        if header is None:
            continue
        items = _items(lines[1:])
        conclusion = next((item[len(CONCLUSION):] for item in items if item.startswith(CONCLUSION)), "")
        if conclusion and conclusion != NO_CONCLUSION and items:
            found[(header["rest"], items[-1])] = conclusion
    return found


def _items(lines: list[str]) -> list[str]:
    """The entry's list items, each with its wrapped continuation lines joined back."""
    items: list[str] = []
    for line in lines:
        if line.startswith("- "):
            items.append(line)
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
    return items


def store_key(entry) -> tuple[str, str]:
    """The same two lines of the journal as the store writes them now."""
    lines = entry_markdown(0, entry)
    header = HEADER.match(lines[0])["rest"]
    return header, _items(lines[2:])[-1]


def read_page(path: str, rev: str | None) -> str:
    if rev is None:
        return Path(path).read_text()
    return subprocess.run(["git", "show", f"{rev}:{path}"], check=True, capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="+", help="journal-<stage>.md files")
    parser.add_argument("--family", required=True)
    parser.add_argument("--rev", default=None, help="read each page as committed at this revision (default: the file)")
    parser.add_argument("--apply", action="store_true", help="also set the kept conclusions on the store's runs")
    args = parser.parse_args(argv)
    kept: list[Conclusion] = []
    for page in args.pages:
        stage = Path(page).stem.removeprefix("journal-")
        shown = page_entries(read_page(page, args.rev))
        entries = journal_entries(stage)
        lacking = [e for e in entries if not e.conclusion and store_key(e) in shown]
        for e in lacking:
            run = _run(e.run_id)
            kept.append(Conclusion.of(run, shown[store_key(e)]))
        print(f"{page}: {len(shown)} conclusions shown, {len(lacking)} missing from the store and kept")
    if kept:
        remember(conclusions_path(args.family), kept)
    if args.apply:
        print(f"{apply_conclusions([args.family])} trial run(s) given their kept conclusion")
    return 0


def _run(run_id: str):
    from stagelab.record.portable import run_here_or_imported

    run = run_here_or_imported(run_id)
    if run is None:
        raise SystemExit(f"the store has no run {run_id} (nor a copy of it)")
    return run


if __name__ == "__main__":
    sys.exit(main())
