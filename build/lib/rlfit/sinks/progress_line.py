"""The progress line, fitted to a width: every figure in full, decoration dropped first. Pure Python, no I/O.

A figure (iteration, env steps, steps/s, ETA, the training episodes' return, the eval reward) is never cut: the
line gives up, in order, the bar, the `train` label, the elapsed time, the step total, wide gaps, long units,
thousands separators, the labels of the iteration and then of the other figures, the iteration (the env steps
and the ETA still tell the progress), and last the `/s` of steps/s, until it fits; a line that does not fit even
then is wrapped between figures by the terminal. At 120 columns it reads

    train  it 412/1000  steps 4,218,880/10,240,000  123,457 steps/s  eta 1:23:45  return 812.3  eval 964.5  elapsed 12:34

and at 40 (env steps, steps/s, training return, eval reward, ETA)

    4218880 123457/s r812.3 e964.5 1:23:45

`fit` returns the richest style that fits; `ProgressLine` (a rich renderable) keeps, per width, the barest style
it has needed, so a figure that grows by a digit and shrinks again does not make the line flicker.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

MIN_BAR = 10
"""A bar narrower than this is no bar; it is left out instead."""


def format_duration(seconds: float) -> str:
    """'1:23:45', or '3:07' under an hour."""
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


@dataclass(frozen=True)
class Figures:
    """What the line shows: `train_return` is None before the first training episode ends, `eval_reward` before
    the first evaluation, `elapsed_s` where no elapsed time is shown."""

    iteration: int
    total_iterations: int
    env_steps: int
    total_env_steps: int
    sps: float
    eta_s: float
    train_return: float | None = None
    eval_reward: float | None = None
    elapsed_s: float | None = None


@dataclass(frozen=True)
class Style:
    """Which decoration the line keeps; STYLES lists them from the richest to the barest."""

    bar: bool = True
    label: bool = True
    elapsed: bool = True
    step_total: bool = True
    gap: str = "  "
    long_units: bool = True
    commas: bool = True
    iteration_label: bool = True
    figure_labels: bool = True
    iteration: bool = True
    sps_unit: bool = True


def _styles() -> tuple[Style, ...]:
    """Each style is the one before with one more piece of decoration given up."""
    styles = [Style()]
    for change in ({"bar": False}, {"label": False}, {"elapsed": False}, {"step_total": False}, {"gap": " "},
                   {"long_units": False}, {"commas": False}, {"iteration_label": False}, {"figure_labels": False},
                   {"iteration": False}, {"sps_unit": False}):
        styles.append(replace(styles[-1], **change))
    return tuple(styles)


STYLES = _styles()


def _number(value: float, commas: bool) -> str:
    """`value` rounded to a whole number, with or without thousands separators."""
    return f"{value:,.0f}" if commas else f"{value:.0f}"


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render(figures: Figures, style: Style) -> tuple[str, str]:
    """(head, tail) of `figures` in `style`: the label (or '') and the figures; a bar, when drawn, goes between."""
    steps = _number(figures.env_steps, style.commas)
    if style.step_total:
        steps += "/" + _number(figures.total_env_steps, style.commas)
    sps = _number(figures.sps, style.commas) + (" steps/s" if style.long_units else "/s" if style.sps_unit else "")
    eta = format_duration(figures.eta_s)
    if style.figure_labels:
        parts = [f"steps {steps}" if style.long_units else steps, sps, f"eta {eta}",
                 f"{'return' if style.long_units else 'ret'} {_reward(figures.train_return)}",
                 f"eval {_reward(figures.eval_reward)}"]
    else:
        parts = [steps, sps, f"r{_reward(figures.train_return)}", f"e{_reward(figures.eval_reward)}", eta]
    if style.iteration:
        parts.insert(0, ("it " if style.iteration_label else "") + f"{figures.iteration}/{figures.total_iterations}")
    if style.elapsed and figures.elapsed_s is not None:
        parts.append(f"elapsed {format_duration(figures.elapsed_s)}")
    return ("train" if style.label else ""), style.gap.join(parts)


class Fitted(NamedTuple):
    """A line fitted to a width: `head` (may be ''), a bar of `bar_width` cells (0: none), `tail`, joined by
    `gap`; `style` is the index in STYLES."""

    style: int
    head: str
    bar_width: int
    tail: str
    gap: str

    def text(self, bar: str = "") -> str:
        """The line, with `bar` (of `bar_width` characters) in the bar's place."""
        return self.gap.join(part for part in (self.head, bar if self.bar_width else "", self.tail) if part)


def fit(figures: Figures, width: int, start: int = 0) -> Fitted:
    """The line in the richest style from STYLES[start] on that fits `width` (the bar takes the room left, when
    that is at least MIN_BAR), or in the barest style when none fits."""
    for index in range(start, len(STYLES)):
        style = STYLES[index]
        head, tail = render(figures, style)
        used = len(head) + len(style.gap) * bool(head) + len(tail)
        if style.bar:
            bar_width = width - used - len(style.gap)
            if bar_width >= MIN_BAR:
                return Fitted(index, head, bar_width, tail, style.gap)
        elif used <= width:
            return Fitted(index, head, 0, tail, style.gap)
    head, tail = render(figures, STYLES[-1])
    return Fitted(len(STYLES) - 1, head, 0, tail, STYLES[-1].gap)  # wider than `width`: the terminal wraps it


def line(figures: Figures, width: int) -> str:
    """The fitted line as plain text, the bar drawn with '=' done and '-' to do (the live line is rich's)."""
    fitted = fit(figures, width)
    done = round(fitted.bar_width * figures.iteration / max(figures.total_iterations, 1))
    return fitted.text("=" * done + "-" * (fitted.bar_width - done))
