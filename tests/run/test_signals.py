"""StopFlag: the first SIGTERM/SIGINT only asks for a stop; a second one exits at once with 143/130."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {src!r})
    from rlfit.run.signals import StopFlag
    with StopFlag() as flag:
        os.kill(os.getpid(), signal.{name})
        time.sleep(0.5)
        print("first: requested =", flag.requested, flush=True)
        os.kill(os.getpid(), signal.{name})
        time.sleep(5)
        print("still running after the second signal", flush=True)
""")


@pytest.mark.parametrize("name, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_second_signal_exits_at_once(name, code):
    script = SCRIPT.format(src=str(REPO / "src"), name=name)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == code, result.stderr
    assert result.stdout.splitlines() == ["first: requested = True"]
    assert result.stderr.splitlines() == [
        f"rlfit: {name} received; finishing this iteration and saving (send it again to exit at once)",
        f"rlfit: second {name}, exiting without saving"]


def test_handlers_are_restored_after_the_block():
    from rlfit.run.signals import StopFlag

    before = signal.getsignal(signal.SIGTERM)
    with StopFlag():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_first_signal_says_its_line_in_one_write(monkeypatch):
    """The stop-grace watcher says its own line at the same moment: one write each keeps the two lines apart."""
    from rlfit.run.signals import StopFlag

    writes: list[str] = []
    monkeypatch.setattr(sys, "stderr", type("Stream", (), {"write": lambda self, text: writes.append(text),
                                                          "flush": lambda self: None})())
    flag = StopFlag()
    flag._handle(signal.SIGTERM, None)
    assert flag.signal_name == "SIGTERM"
    assert writes == ["rlfit: SIGTERM received; finishing this iteration and saving (send it again to exit at once)\n"]
