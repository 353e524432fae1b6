"""The progress lines: an ETA from the iterations' own times (not the compile), and the last line once."""

from __future__ import annotations

import io
import re

from rlfit.sinks.console import ConsoleSink


def test_first_eta_comes_from_the_first_iteration_not_from_the_compile(monkeypatch):
    clock = iter([1000.0, 1001.0, 1002.0, 1003.0])
    monkeypatch.setattr("rlfit.sinks.console.time.perf_counter", lambda: next(clock))
    stream = io.StringIO()
    console = ConsoleSink(total_iterations=91, total_env_steps=9100, live=False, stream=stream)
    # the sink was created long before (compiling took minutes); the first iteration took 1 s
    console.write("train", {"iteration": 1, "env_steps": 100, "iteration_s": 1.0, "sps": 100.0})
    assert "eta 1:30" in stream.getvalue()  # 90 iterations left at 1 s each


def test_the_final_line_is_printed_once():
    stream = io.StringIO()
    console = ConsoleSink(total_iterations=2, total_env_steps=200, live=False, stream=stream)
    console.write("train", {"iteration": 1, "env_steps": 100, "iteration_s": 0.1, "sps": 1000.0})
    console.write("train", {"iteration": 2, "env_steps": 200, "iteration_s": 0.1, "sps": 1000.0})
    console.write("eval", {"iteration": 2, "env_steps": 200, "eval/episode_reward": 5.0})
    console.close()
    finals = [line for line in stream.getvalue().splitlines() if line.startswith("it 2/2")]
    assert len(finals) == 1 and "eval 5.0" in finals[0]


def test_a_final_line_without_an_eval_row_is_printed_at_close():
    stream = io.StringIO()
    console = ConsoleSink(total_iterations=1, total_env_steps=100, live=False, stream=stream)
    console.write("train", {"iteration": 1, "env_steps": 100, "iteration_s": 0.1, "sps": 1000.0})
    console.close()
    assert [line for line in stream.getvalue().splitlines() if line.startswith("it 1/1")] != []


class Terminal(io.StringIO):
    """A stream that says it is a terminal, so the sink draws its live line into it."""

    def isatty(self) -> bool:
        return True


def test_the_live_line_on_an_80_column_terminal_keeps_every_figure_and_fits(monkeypatch):
    """The first minutes on an 80-column terminal: the line was cut ('tra...', 'eval 964...')."""
    monkeypatch.setenv("COLUMNS", "80")
    terminal = Terminal()
    console = ConsoleSink(total_iterations=1000, total_env_steps=10_240_000, stream=terminal)
    console.write("train", {"iteration": 411, "env_steps": 4_208_640, "iteration_s": 0.083, "sps": 123_391.2,
                            "episode/return": 811.07})
    console.write("eval", {"iteration": 411, "env_steps": 4_208_640, "eval/episode_reward": 964.51})
    console.message("saved checkpoint 411")
    console.write("train", {"iteration": 412, "env_steps": 4_218_880, "iteration_s": 0.083, "sps": 123_456.7,
                            "episode/return": 812.34})
    console.close()
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.getvalue())  # rich's colours and cursor moves
    lines = [text for text in re.split(r"[\r\n]", drawn) if text.strip()]
    assert lines and all(len(text) <= 80 for text in lines), lines
    assert "saved checkpoint 411" in lines
    last = lines[-1]
    for figure in ("412/1000", "4,218,880", "123,457", "return 812.3", "eval 964.5", "eta "):
        assert figure in last, (figure, last)
    assert "..." not in drawn and "\N{HORIZONTAL ELLIPSIS}" not in drawn
