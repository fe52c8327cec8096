"""No scientific notation in docs/results (issue 45, bars/09), so none comes back.

Every text file there is read: the pages, the journals and the runs behind them (`stagelab report`), the
hand-curated history (trials.yaml, the READMEs, the patches, the tools' outputs kept under history/). A
token reads as scientific notation when `core.formatting.scientific_notation` finds it: a number (7.01e-05,
1.977e+05, 1e9) or a short commit written bare (6123e17, which reads as 6.123e20; the lab writes g6123e17).
Left out, each for its reason:
- files that are not text (the plots, the compressed record stores): no reader sees a number in them;
- digits and an `e` inside a name, after a dot or a letter (a kernel tag's digest in a metric key,
  `...O.n.e.W..8611e38319`, a column of a runs CSV; s8e4): a name, not a number.
"""

from pathlib import Path

from stagelab.core.formatting import scientific_notation

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def _text(path: Path) -> str | None:
    """The file's text; None for a file that is not text (a plot, a gzipped store)."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def scientific_tokens(folder: Path) -> list[str]:
    """`file:line: token` for every token under the folder that reads as scientific notation."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = _text(path)
        for number, line in enumerate((text or "").splitlines(), 1):
            found += [f"{path.relative_to(folder)}:{number}: {token}" for token in scientific_notation(line)]
    return found


def test_the_scan_reads_every_kind_of_results_file(tmp_path):
    """The check itself: a page, a CSV, a YAML number, a commit in prose; a plot's bytes and a name's
    digest are not read as numbers."""
    (tmp_path / "page.md").write_text("Runs from commit(s) 6123e17696; p50 1.2e+03\n")
    (tmp_path / "runs.csv").write_text("metrics.x/k.O.n.e.W..8611e38319\n7.012881413814842e-05\n")
    (tmp_path / "trials.yaml").write_text("- {trial: 5.58e-04, default: 0.000558}\n")
    (tmp_path / "plot.png").write_bytes(b"\x89PNG\0\x001e5 2.5e+38")
    assert [hit.split(": ", 1)[1] for hit in scientific_tokens(tmp_path)] == [
        "6123e17696", "1.2e+03", "7.012881413814842e-05", "5.58e-04"]


def test_docs_results_hold_no_scientific_notation():
    hits = scientific_tokens(RESULTS)
    assert not hits, (f"{len(hits)} token(s) in scientific notation under docs/results (numbers in fixed notation "
                      "through core.formatting, commits as short_commit writes them, g6123e17):\n" + "\n".join(hits[:40]))
