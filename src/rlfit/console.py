"""Lines for a person watching: each written whole, in one write, then flushed.

`print(text)` writes the text and its newline apart, so two threads printing at once can run their lines together
(a GPU run showed "compiling 2 of 3: evaluationcompiling 3 of 3" from two compile threads, and the signal handler
and the stop-grace watcher each announce a stop at the same moment). One `write` of the whole line keeps lines apart.
"""

from __future__ import annotations

import sys
from typing import TextIO


def say_line(line: str, stream: TextIO | None = None) -> None:
    """Writes `line` and its newline to `stream` (stdout when None, looked up at the call) in one write, then
    flushes."""
    out = sys.stdout if stream is None else stream
    out.write(f"{line}\n")
    out.flush()


def warn_line(line: str) -> None:
    """`say_line` to stderr (looked up at the call)."""
    say_line(line, sys.stderr)
