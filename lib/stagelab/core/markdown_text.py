"""Markdown prose kept readable as a file: a list item's text wrapped at about 100 columns (a
journal's numbers once ran to 1,118 characters on one line), the words themselves left as written;
a table or code fence inside the text is never wrapped, since a line break would change what it is."""

from __future__ import annotations

import textwrap

WIDTH = 100
INDENT = "  "  # a list item's continuation lines
_AS_IS = ("|", "```", "~~~")


def wrap_item(first: str, text: str, width: int = WIDTH) -> list[str]:
    """`first` (the item's start, "- Hypothesis: ") and the text after it, wrapped, continuation lines
    indented under the item; a text of several lines keeps its line breaks, each line wrapped."""
    lines: list[str] = []
    fenced = False
    for number, line in enumerate(text.splitlines() or [""]):
        lead = first if number == 0 else INDENT
        if line.lstrip().startswith(_AS_IS[1:]):
            fenced = not fenced
        if fenced or line.lstrip().startswith(_AS_IS):
            lines.append(lead + line)
            continue
        lines += textwrap.wrap(line, width, initial_indent=lead, subsequent_indent=INDENT, break_long_words=False,
                               break_on_hyphens=False) or [lead.rstrip()]
    return lines
