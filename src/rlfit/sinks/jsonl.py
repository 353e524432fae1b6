"""metrics.jsonl: one JSON object per line, flushed at once so a killed run keeps what it logged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class JsonlSink:
    def __init__(self, path: Path):
        self.path = path
        self.file = open(path, "a", buffering=1)

    def rewind(self, iteration: int) -> None:
        self.file.close()
        truncate_after(self.path, iteration)
        self.file = open(self.path, "a", buffering=1)

    def write(self, kind: str, row: dict[str, Any]) -> None:
        self.file.write(json.dumps({"kind": kind, **row}) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def read_rows(path: Path) -> list[dict[str, Any]]:
    """All complete rows of a metrics file (a torn last line from a kill is skipped)."""
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def truncate_after(path: Path, iteration: int) -> None:
    """Drops rows past `iteration` (and torn lines), so a resumed run appends without duplicate steps."""
    rows = [row for row in read_rows(path) if row.get("iteration", 0) <= iteration]
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))
    tmp.replace(path)
