"""docs/results/<family>/same_code.yaml: the stages whose code two commits compile to identically.

`stagelab same-code` writes one entry per stage it found the same (record.same_code): the two
commits, the stage's run source hash at each (core.sources.run_source_hash, the `source_hash` a
run records), the nvcc that compiled both, the digests compared and the date. The results pages
read it back (record.source_state): a run of one source hash measured the code of every source
hash it reaches through a stage's entries, a chain included (A same as B, B same as C), as long
as the run was built by the nvcc that compiled both sides of each entry on the way.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ..core.ledger_file import read_ledger, write_ledger
from ..core.paths import results_dir

FILE_NAME = "same_code.yaml"
HEADER = ("# Written by `stagelab same-code --from COMMIT`: each stage whose code compiled at from_commit and at\n"
          "# to_commit is the same (every kernel's SASS, the whole device image, the host code, the binding, the\n"
          "# family's Python, or the inputs it makes: family_python). A run of from_source_hash counts as current for\n"
          "# to_source_hash. Do not edit by hand.\n")


@dataclass(frozen=True)
class SameCodeEntry:
    stage: str
    from_commit: str
    from_source_hash: str
    to_commit: str
    to_source_hash: str
    nvcc: str
    sass_md5: str  # the normalized listing's (tools/sass_md5.py prints the same md5)
    kernels: int
    device_image_md5: str
    host_code_md5: str
    checked: str  # the date, UTC
    # Where the family's Python differed: which files, and the inputs shown the same (record.same_inputs)
    family_python: str = ""

    @property
    def sides(self) -> tuple[str, str]:
        return self.from_source_hash, self.to_source_hash


def same_code_path(family: str) -> Path:
    return results_dir(family) / FILE_NAME


def read_entries(path: Path) -> list[SameCodeEntry]:
    """The file's entries; none when it does not exist."""
    return read_ledger(path, SameCodeEntry)


def write_entries(path: Path, added: list[SameCodeEntry]) -> list[SameCodeEntry]:
    """The file's entries with `added` in place of any of the same stage and sides, written back."""
    replaced = {(e.stage, *e.sides) for e in added}
    entries = [e for e in read_entries(path) if (e.stage, *e.sides) not in replaced] + added
    entries.sort(key=lambda e: (e.stage, e.checked))
    write_ledger(path, HEADER, entries)
    return entries


class SameCode:
    """The stages' equivalent source hashes, as the entries of a family's same_code.yaml say."""

    def __init__(self, entries: list[SameCodeEntry]):
        self._edges: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for entry in entries:  # the same code both ways: a revert to the older source is the same code too
            self._edges[(entry.stage, entry.nvcc)][entry.from_source_hash].add(entry.to_source_hash)
            self._edges[(entry.stage, entry.nvcc)][entry.to_source_hash].add(entry.from_source_hash)

    @classmethod
    def of_family(cls, family: str) -> "SameCode":
        return cls(read_entries(same_code_path(family)))

    def same(self, stage: str, source_hash: str, other: str, nvcc: str) -> bool:
        """Whether `source_hash` reaches `other` through the stage's entries checked with `nvcc`."""
        edges = self._edges.get((stage, nvcc), {})
        seen, frontier = {source_hash}, [source_hash]
        while frontier:
            for neighbour in edges.get(frontier.pop(), ()):
                if neighbour == other:
                    return True
                if neighbour not in seen:
                    seen.add(neighbour)
                    frontier.append(neighbour)
        return False
