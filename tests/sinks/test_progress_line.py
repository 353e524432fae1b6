"""The progress line fitted to a terminal's width: every figure with all its digits, never longer than the
width, decoration (bar, labels, units, separators) given up first, and no flicker between two layouts."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from rlfit.sinks.console import ProgressLine
from rlfit.sinks.progress_line import STYLES, Figures, fit, line

CARTPOLE_CPU = Figures(iteration=412, total_iterations=1000, env_steps=4_218_880, total_env_steps=10_240_000,
                       sps=123_456.7, eta_s=5025.0, train_return=812.34, eval_reward=964.51, elapsed_s=754.0)
"""A quick-preset CartpoleBalance run on a CPU, a third of the way."""
HUMANOID_GPU = Figures(iteration=1_871, total_iterations=2_442, env_steps=153_272_320, total_env_steps=200_048_640,
                       sps=1_043_276.2, eta_s=4_125.0, train_return=-37.25, eval_reward=5_312.87, elapsed_s=9_001.0)
"""A long GPU run: nine-digit step counts, a negative return, a million steps/s."""
STARTING = Figures(iteration=1, total_iterations=61, env_steps=163_840, total_env_steps=10_000_000, sps=8_412.0,
                   eta_s=36_000.0, train_return=None, eval_reward=None, elapsed_s=42.0)
"""The first iteration: no episode has ended, no evaluation yet."""
REALISTIC = {"cartpole cpu": CARTPOLE_CPU, "humanoid gpu": HUMANOID_GPU, "starting": STARTING}
WIDTHS = (40, 60, 80, 120)


def numbers_in(text: str) -> list[str]:
    """Every number written in `text`, thousands separators removed ('4,218,880' -> '4218880')."""
    return [token.replace(",", "") for token in re.findall(r"-?\d[\d,]*(?:\.\d+)?", text)]


def duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, minutes, rest = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{hours}:{minutes:02d}:{rest:02d}" if hours else f"{minutes}:{rest:02d}"


def essential(figures: Figures) -> list[str]:
    """The figures every width shows, as independent strings: env steps, steps/s (rounded), ETA, return and
    eval reward (one decimal)."""
    rewards = [f"{value:.1f}" for value in (figures.train_return, figures.eval_reward) if value is not None]
    return [str(figures.env_steps), str(round(figures.sps)), duration(figures.eta_s), *rewards]


def assert_figures_whole(text: str, figures: Figures, with_iteration: bool) -> None:
    found = numbers_in(text)
    for figure in essential(figures):
        if ":" in figure:
            assert re.search(rf"(?<![\d:]){figure}(?![\d:])", text), (figure, text)
        else:
            assert figure in found, (figure, text)
    if with_iteration:
        assert f"{figures.iteration}/{figures.total_iterations}" in text, text
    assert "..." not in text and "\N{HORIZONTAL ELLIPSIS}" not in text, text


@pytest.mark.parametrize("name", sorted(REALISTIC))
@pytest.mark.parametrize("width", WIDTHS)
def test_the_line_fits_and_keeps_every_figure_whole(name, width):
    figures = REALISTIC[name]
    text = line(figures, width)
    assert len(text) <= width, (len(text), text)
    assert_figures_whole(text, figures, with_iteration=width >= 60)
    if figures.eval_reward is None:
        assert re.search(r"(eval |e)-(\s|$)", text), text  # no eval yet: a dash, not a made-up number


@pytest.mark.parametrize("width", WIDTHS)
def test_decoration_goes_first(width):
    """Wider terminals keep more: a style is never barer at a wider width, and the widest shows it all."""
    styles = [fit(CARTPOLE_CPU, w).style for w in (40, 60, 80, 120, 200)]
    assert styles == sorted(styles, reverse=True)
    widest = line(CARTPOLE_CPU, 200)
    assert widest.startswith("train  ==") and "steps/s" in widest and "elapsed 12:34" in widest
    assert "/10,240,000" in widest and "return 812.3" in widest and "eval 964.5" in widest


def test_the_styles_strip_decoration_one_piece_at_a_time():
    lengths = [len(line_of(style)) for style in STYLES[1:]]  # without the bar, whose width is what is left
    assert lengths == sorted(lengths, reverse=True) and len(set(lengths)) == len(lengths)


def line_of(style) -> str:
    from rlfit.sinks.progress_line import render

    head, tail = render(CARTPOLE_CPU, style)
    return style.gap.join(part for part in (head, tail) if part)


def rendered(renderable, width: int) -> list[str]:
    """The lines rich draws of `renderable` on a colour terminal `width` columns wide, colour codes removed."""
    stream = io.StringIO()
    Console(file=stream, width=width, color_system="standard", force_terminal=True).print(renderable)
    return re.sub(r"\x1b\[[0-9;]*m", "", stream.getvalue()).rstrip("\n").split("\n")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_live_line_as_rich_draws_it(width):
    progress = ProgressLine(started=time.perf_counter())
    progress.figures = CARTPOLE_CPU
    lines = rendered(progress, width)
    assert len(lines) == 1 and len(lines[0]) <= width, lines
    assert_figures_whole(lines[0], CARTPOLE_CPU, with_iteration=width >= 60)


def test_a_wide_terminal_gets_rich_bar_filling_the_rest_of_the_line():
    progress = ProgressLine(started=time.perf_counter())
    progress.figures = CARTPOLE_CPU
    (text,) = rendered(progress, 200)
    assert len(text) == 200 and re.match(r"train  [━╺╸]{40,}  it 412/1000  steps 4,218,880/10,240,000  ", text), text


def test_a_line_too_wide_for_any_style_wraps_between_figures_and_never_cuts_one():
    huge = Figures(iteration=99_999, total_iterations=100_000, env_steps=12_345_678_901, total_env_steps=12_345_689_999,
                   sps=12_345_678.9, eta_s=359_999.0, train_return=-123_456.78, eval_reward=-123_456.78)
    progress = ProgressLine(started=time.perf_counter())
    progress.figures = huge
    lines = rendered(progress, 40)
    assert len(lines) == 2 and all(len(text) <= 40 for text in lines), lines
    assert_figures_whole(" ".join(lines), huge, with_iteration=False)


def test_a_figure_that_gains_and_loses_a_digit_does_not_make_the_layout_flicker():
    # the width at which 99,999 steps/s fits one style and 100,001 needs the next
    slow, fast = (Figures(**{**CARTPOLE_CPU.__dict__, "sps": sps}) for sps in (99_999.0, 100_001.0))
    width = next(w for w in range(40, 200) if fit(slow, w).style < fit(fast, w).style == fit(slow, w).style + 1
                 and fit(fast, w).style > 0)
    progress = ProgressLine(started=time.perf_counter())
    layouts = []
    for figures in (slow, fast, slow, fast, slow):
        progress.figures = figures
        (text,) = rendered(progress, width)
        assert len(text) <= width
        layouts.append(re.sub(r"[\d,.]+", "#", text))
    assert layouts[0] != layouts[1]  # the wider figure needed a barer style ...
    assert layouts[1:] == [layouts[1]] * 4  # ... and the line keeps it rather than flipping back and forth
