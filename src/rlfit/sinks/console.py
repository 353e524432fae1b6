"""Progress for people: a live bar on a terminal, plain lines otherwise, nothing when quiet."""

from __future__ import annotations

import sys
import time
from typing import Any


def format_duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ConsoleSink:
    """Shows env steps, steps/s, ETA and the last eval reward."""

    def __init__(self, total_iterations: int, total_env_steps: int, start_iteration: int = 0, live: bool | None = None,
                 stream=None):
        self.stream = stream or sys.stderr
        self.total_iterations = total_iterations
        self.total_env_steps = total_env_steps
        self.live = self.stream.isatty() if live is None else live
        self.last_eval: float | None = None
        self.last_sps = 0.0
        self.last_line = 0.0
        self.started = time.perf_counter()
        self.first_iteration = start_iteration
        self.progress = None
        if self.live:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("[bold]train"), BarColumn(), TextColumn("{task.description}"),
                                     TimeElapsedColumn(), transient=False)
            self.task = self.progress.add_task("compiling...", total=total_iterations, completed=start_iteration)
            self.progress.start()

    def retarget(self, total_iterations: int, total_env_steps: int) -> None:
        """New totals after the plan changed (out-of-memory back-off)."""
        self.total_iterations, self.total_env_steps = total_iterations, total_env_steps
        if self.progress is not None:
            self.progress.update(self.task, total=total_iterations)

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text)
        else:
            print(text, file=self.stream, flush=True)

    def write(self, kind: str, row: dict[str, Any]) -> None:
        if kind == "eval":
            self.last_eval = row["eval/episode_reward"]
        done = row["iteration"]
        if "sps" in row:
            self.last_sps = row["sps"]
        elapsed = time.perf_counter() - self.started
        per_iteration = elapsed / max(1, done - self.first_iteration)
        eta = per_iteration * (self.total_iterations - done)
        reward = "-" if self.last_eval is None else f"{self.last_eval:.1f}"
        text = (f"it {done}/{self.total_iterations}  steps {row['env_steps']:,}/{self.total_env_steps:,}  "
                f"{self.last_sps:,.0f} steps/s  eta {format_duration(eta)}  eval {reward}")
        if self.progress is not None:
            self.progress.update(self.task, completed=done, description=text)
        elif kind == "eval" or time.perf_counter() - self.last_line > 10 or done == self.total_iterations:
            self.last_line = time.perf_counter()
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
