"""TensorBoard event files under `tb/`, one scalar per numeric metric, x-axis = env steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SKIP = {"iteration", "env_steps", "wall_s"}


class TensorBoardSink:
    def __init__(self, directory: Path, purge_step: int | None = None):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(str(directory), purge_step=purge_step, flush_secs=10)

    def write(self, kind: str, row: dict[str, Any]) -> None:
        step = int(row["env_steps"])
        for name, value in row.items():
            if name in SKIP or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            tag = name if "/" in name else f"{kind}/{name}"
            self.writer.add_scalar(tag, value, step)

    def close(self) -> None:
        self.writer.close()
