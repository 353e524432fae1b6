"""The results JSON under benchmarks/results/: which file a registry source names (the newest of a glob) and
where a record's figures come from (command, date, commit, machine, load)."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

from benchmarks.benchmark_types import Provenance

RESULTS = Path(__file__).resolve().parent / "results"


def newest(pattern: str, results: Path | None = None) -> Path | None:
    """The JSON under `results` (default results/) that `pattern` names, or of several the one with the latest
    `date`; None if none."""
    paths = [Path(path) for path in glob.glob(str((results or RESULTS) / pattern))]
    if not paths:
        return None
    return max(paths, key=lambda path: (str(provenance(json.loads(path.read_text())).date), path.name))


def provenance(record: dict[str, Any]) -> Provenance:
    """The command, date, commit, machine and load of a results record (a sitting-by-sitting record such as
    suite.json: its latest sitting; a record of runs such as pointmass_collapse.json: its latest run)."""
    latest = record
    if "command" not in record:
        sittings = record.get("sessions") or sorted(
            (run for run in (record.get("runs") or {}).values() if isinstance(run, dict) and "date" in run),
            key=lambda run: run["date"])
        latest = sittings[-1] if sittings else record
    git = latest.get("git") or {}
    commit = (git.get("head") or "")[:7]
    if git.get("src_uncommitted_files"):
        commit += f" (+{git['src_uncommitted_files']} uncommitted in src/)"
    device = record.get("device") if isinstance(record.get("device"), str) else ""
    if not device or device.startswith("cpu"):
        cores = latest.get("nproc") or record.get("nproc")
        device = f"{cores}-core CPU" if cores else "CPU"
    start, end = latest.get("loadavg_1min_start", latest.get("loadavg_1min_before")), latest.get("loadavg_1min_end")
    load = "-" if start is None else (f"{start}" if end is None else f"{start}-{end}")
    return Provenance(str(latest.get("command", "-")), str(latest.get("date", "-"))[:16].replace("T", " "),
                      commit or "-", device, load)
