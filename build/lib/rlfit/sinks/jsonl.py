"""metrics.jsonl: one JSON object per line, each line one `write` to a file opened for appending.

A line reaches the file whole or not at all (a kill -9 between two writes loses no line and tears none;
only a full disk or a machine that loses power mid-write can leave a torn last line), and the file is
forced to disk at every checkpoint. Readers here tell a torn last line (expected after a crash) from a
damaged line in the middle (reported, never dropped silently).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlfit.rundir.atomic import write_atomic
from rlfit.rundir.write_failures import naming


class JsonlSink:
    """Appends each row to metrics.jsonl as one whole line."""

    def __init__(self, path: Path):
        self.path = path
        self._descriptor = _open_append(path)

    def rewind(self, iteration: int) -> None:
        self.close()
        truncate_after(self.path, iteration)
        self._descriptor = _open_append(self.path)

    def write(self, kind: str, row: dict[str, Any]) -> None:
        line = (json.dumps({"kind": kind, **row}) + "\n").encode()
        with naming(self.path):
            written = os.write(self._descriptor, line)
            while written < len(line):  # only on a nearly full disk; the next write raises ENOSPC then
                written += os.write(self._descriptor, line[written:])

    def sync(self) -> None:
        """Forces the rows written so far to disk (called at every checkpoint)."""
        with naming(self.path):
            os.fsync(self._descriptor)

    def close(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None


@dataclass
class MetricsFile:
    """What a metrics.jsonl holds: its good rows, the damaged lines in the middle, and a torn last line."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    damaged: list[int] = field(default_factory=list)
    """1-based numbers of lines that are not a JSON object, other than a torn last line."""
    torn_tail: bool = False
    """The last line is incomplete (no newline and not JSON): what a crash mid-write leaves."""
    line_iterations: list[int | None] = field(default_factory=list)
    """Per line: the row's iteration, None for a damaged line."""

    def damaged_before(self, iteration: int) -> list[int]:
        """Damaged lines among the rows up to `iteration` (those followed by a row at or before it)."""
        last_kept = max((n for n, it in enumerate(self.line_iterations, 1) if it is not None and it <= iteration),
                        default=0)
        return [n for n in self.damaged if n < last_kept]


def read_metrics(path: Path) -> MetricsFile:
    """Parses metrics.jsonl (a missing file holds nothing)."""
    try:
        return parse_metrics(path.read_bytes())
    except FileNotFoundError:
        return MetricsFile()


def parse_metrics(data: bytes) -> MetricsFile:
    """Parses the bytes of a metrics file."""
    result = MetricsFile()
    if not data:
        return result
    lines = data.decode(errors="replace").split("\n")
    ends_whole = lines[-1] == ""
    lines = lines[:-1] if ends_whole else lines
    for number, line in enumerate(lines, 1):
        row = _parse(line)
        if row is None:
            if number == len(lines) and not ends_whole:
                result.torn_tail = True
            elif line.strip():
                result.damaged.append(number)
            result.line_iterations.append(None)
            continue
        result.rows.append(row)
        result.line_iterations.append(row.get("iteration", 0))
    return result


def read_rows(path: Path) -> list[dict[str, Any]]:
    """All good rows of a metrics file."""
    return read_metrics(path).rows


def rows_text(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def truncate_after(path: Path, iteration: int, rows: list[dict[str, Any]] | None = None) -> None:
    """Keeps the rows up to `iteration` (of `rows` when given, else of the file), atomically."""
    rows = read_rows(path) if rows is None else rows
    write_atomic(path, rows_text([row for row in rows if row.get("iteration", 0) <= iteration]))


def _parse(line: str) -> dict[str, Any] | None:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None


def _open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
