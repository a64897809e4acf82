"""The demo's lines folded to a terminal's width, continuation lines indented under the text they
continue (after a "[  1.2s] " stamp, or after a "label      " column), so the story stays
readable in 80 columns."""

from __future__ import annotations

import re
import textwrap
from typing import TextIO

# "[ 12.3s] text" or "label   text" (a label column of two spaces or more), or an indented row
_HANG = re.compile(r"^(\[\s*[\d.]+s\] \s*|\s*\S[^\[]*?\s{2,}|\s+)")
_MIN_TEXT = 24  # columns left for text after the hanging indent, at least


def fold(line: str, width: int) -> list[str]:
    """`line` as lines of at most `width` columns (a word longer than that is split)."""
    if len(line) <= width:
        return [line]
    hang = _HANG.match(line)
    indent = len(hang.group(1)) if hang else 0
    if width - indent < _MIN_TEXT:
        indent = min(4, width // 4)
    return textwrap.wrap(
        line,
        width=width,
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
        drop_whitespace=True,
    ) or [line[:width]]


class Folded:
    """A text stream that folds every line written to it to `width` columns."""

    def __init__(self, out: TextIO, width: int) -> None:
        self._out = out
        self._width = width
        self._partial = ""

    def write(self, text: str) -> int:
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            self._out.write("\n".join(fold(line, self._width)) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._out.write("\n".join(fold(self._partial, self._width)))
            self._partial = ""
        self._out.flush()
