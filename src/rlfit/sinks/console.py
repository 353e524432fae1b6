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
        self.first_row: tuple[int, float] | None = None
        self.pending: str | None = None
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
        reward = "-" if self.last_eval is None else f"{self.last_eval:.1f}"
        text = (f"it {done}/{self.total_iterations}  steps {row['env_steps']:,}/{self.total_env_steps:,}  "
                f"{self.last_sps:,.0f} steps/s  eta {format_duration(self._eta(kind, row))}  eval {reward}")
        self.pending = None
        if self.progress is not None:
            self.progress.update(self.task, completed=done, description=text)
        elif kind == "train" and done == self.total_iterations:
            self.pending = text  # the last iteration's eval row follows; printed once, by it or by close()
        elif kind == "eval" or time.perf_counter() - self.last_line > 10:
            self.last_line = time.perf_counter()
            print(text, file=self.stream, flush=True)

    def _eta(self, kind: str, row: dict[str, Any]) -> float:
        """Seconds left: the time per iteration measured since the first iteration of this session ended
        (evaluations and checkpoints included), or the first iteration's own time until a second one ends."""
        done, now = row["iteration"], time.perf_counter()
        if self.first_row is None:
            if kind != "train":
                return 0.0
            self.first_row = (done, now)
            return row.get("iteration_s", 0.0) * (self.total_iterations - done)
        first_done, first_at = self.first_row
        if done <= first_done:
            return row.get("iteration_s", 0.0) * (self.total_iterations - done)
        return (now - first_at) / (done - first_done) * (self.total_iterations - done)

    def close(self) -> None:
        if self.pending is not None:
            print(self.pending, file=self.stream, flush=True)
            self.pending = None
        if self.progress is not None:
            self.progress.stop()
