"""Progress for people: a live line on a terminal, fitted to its width; plain lines otherwise; nothing when quiet.

The live line (`ProgressLine`, drawn by rich's `Live`) is fitted to the terminal's width at every refresh by
`rlfit.sinks.progress_line`: every figure in full, decoration dropped first.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any

from rlfit.sinks.progress_line import STYLES, Figures, fit, format_duration, render

__all__ = ["ConsoleSink", "ProgressLine", "format_duration"]

PLAIN = STYLES[2]
"""The style of plain lines (a log, a pipe): every figure and label, no bar, no `train` label."""


class ProgressLine:
    """A rich renderable: the latest figures fitted to the width rich renders at (the terminal's), the elapsed
    time read at each refresh. Per width it keeps the barest style it has needed, so the line does not flicker
    between two styles when a figure gains and loses a digit."""

    def __init__(self, started: float):
        self.started = started
        self.figures: Figures | None = None
        self._styles: dict[int, int] = {}

    def current(self) -> Figures | None:
        """The figures with the elapsed time now."""
        if self.figures is None:
            return None
        return replace(self.figures, elapsed_s=time.perf_counter() - self.started)

    def __rich_console__(self, console, options):
        from rich.progress_bar import ProgressBar
        from rich.text import Text

        figures, width = self.current(), options.max_width
        if figures is None:
            yield Text(f"train  compiling...  {format_duration(time.perf_counter() - self.started)}")
            return
        fitted = fit(figures, width, start=self._styles.get(width, 0))
        self._styles[width] = fitted.style
        pieces: list[Any] = [(fitted.head, "bold"), fitted.gap] if fitted.head else []
        if fitted.bar_width:
            bar = ProgressBar(total=max(figures.total_iterations, 1), completed=figures.iteration,
                              width=fitted.bar_width)
            drawn = [(segment.text, segment.style) for segment in console.render(
                bar, options.update(width=fitted.bar_width))]
            left = fitted.bar_width - sum(len(text) for text, _ in drawn)  # without colour rich draws only the done part
            pieces += [*drawn, " " * left + fitted.gap]
        yield Text.assemble(*pieces, fitted.tail)


class ConsoleSink:
    """Shows the iteration, env steps, steps/s, ETA, the training episodes' return and the last eval reward."""

    def __init__(self, total_iterations: int, total_env_steps: int, start_iteration: int = 0, live: bool | None = None,
                 stream=None):
        self.stream = stream or sys.stderr
        self.total_iterations = total_iterations
        self.total_env_steps = total_env_steps
        self.live = self.stream.isatty() if live is None else live
        self.last_eval: float | None = None
        self.last_return: float | None = None
        self.last_sps = 0.0
        self.last_line = 0.0
        self.first_row: tuple[int, float] | None = None
        self.pending: str | None = None
        self.line = ProgressLine(time.perf_counter())
        self.display = None
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self.display = Live(self.line, console=Console(file=self.stream), refresh_per_second=4)
            self.display.start()

    def retarget(self, total_iterations: int, total_env_steps: int) -> None:
        """New totals after the plan changed (out-of-memory back-off)."""
        self.total_iterations, self.total_env_steps = total_iterations, total_env_steps

    def message(self, text: str) -> None:
        if self.display is not None:
            self.display.console.print(text, highlight=False, markup=False)
        else:
            print(text, file=self.stream, flush=True)

    def write(self, kind: str, row: dict[str, Any]) -> None:
        if kind == "eval":
            self.last_eval = row["eval/episode_reward"]
        if "episode/return" in row:
            self.last_return = row["episode/return"]
        done = row["iteration"]
        if "sps" in row:
            self.last_sps = row["sps"]
        now = time.perf_counter()
        figures = Figures(done, self.total_iterations, row["env_steps"], self.total_env_steps, self.last_sps,
                          self._eta(kind, row, now), self.last_return, self.last_eval)
        self.pending = None
        if self.display is not None:
            self.line.figures = figures
            self.display.refresh()
            return
        text = render(replace(figures, elapsed_s=now - self.line.started), PLAIN)[1]
        if kind == "train" and done == self.total_iterations:
            self.pending = text  # the last iteration's eval row follows; printed once, by it or by close()
        elif kind == "eval" or now - self.last_line > 10:
            self.last_line = now
            print(text, file=self.stream, flush=True)

    def _eta(self, kind: str, row: dict[str, Any], now: float) -> float:
        """Seconds left: the time per iteration measured since the first iteration of this session ended
        (evaluations and checkpoints included), or the first iteration's own time until a second one ends."""
        done = row["iteration"]
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
        if self.display is not None:
            self.display.stop()
            self.display = None
