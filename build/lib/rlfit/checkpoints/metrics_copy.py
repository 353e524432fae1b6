"""metrics.jsonl across sessions: the copy each checkpoint keeps, and the repair on resume.

Each checkpoint holds `metrics.jsonl.gz`, the run's metrics as they were when it was saved. On resume the
rows past the checkpoint are dropped (they are trained again), and a damaged line among the rows kept is
reported in one line and repaired from the checkpoint's copy where that copy is intact.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from pathlib import Path

from rlfit.checkpoints.format import step_dir
from rlfit.rundir.layout import RunDir
from rlfit.sinks.jsonl import MetricsFile, parse_metrics, read_metrics, truncate_after

METRICS_COPY = "metrics.jsonl.gz"


def metrics_copy(metrics_path: Path) -> bytes:
    """The metrics file's bytes, gzipped, for a checkpoint (an absent file gives an empty copy)."""
    try:
        data = metrics_path.read_bytes()
    except FileNotFoundError:
        data = b""
    return gzip.compress(data, mtime=0)


def read_copy(checkpoint: Path) -> MetricsFile | None:
    """The metrics copy inside a checkpoint's folder, or None when it is missing or unreadable."""
    try:
        return parse_metrics(gzip.decompress((checkpoint / METRICS_COPY).read_bytes()))
    except (OSError, EOFError, zlib.error):
        return None


def repair_metrics(directory: RunDir, iteration: int, warn: Callable[[str], None]) -> None:
    """Cuts metrics.jsonl back to `iteration`; damaged lines before it are reported and repaired if possible."""
    found = read_metrics(directory.metrics)
    damaged = found.damaged_before(iteration)
    rows = found.rows
    if damaged:
        lines = ", ".join(str(n) for n in damaged[:5]) + (" ..." if len(damaged) > 5 else "")
        copy = read_copy(step_dir(directory.checkpoints, iteration))
        if copy is not None and not copy.damaged and not copy.torn_tail:
            rows = copy.rows
            warn(f"rlfit: warning: {directory.metrics} line {lines} was damaged; restored the rows up to iteration "
                 f"{iteration} from checkpoint {iteration}'s copy")
        else:
            warn(f"rlfit: warning: {directory.metrics} line {lines} is damaged and checkpoint {iteration} holds no "
                 f"intact copy; those rows are missing from the metrics (the training state is unaffected)")
    truncate_after(directory.metrics, iteration, rows)

