"""rlfit.cli.output's progress lines: each is one write, so lines said from several threads at once (the compile
threads) never run together."""

from __future__ import annotations

import argparse
import sys
import threading

from rlfit.cli.output import progress


class Writes:
    """A stream that records each write call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.calls.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_each_progress_line_is_one_write_with_its_newline(monkeypatch):
    stream = Writes()
    monkeypatch.setattr(sys, "stdout", stream)
    say = progress(argparse.Namespace(quiet=False, json=False))
    threads = [threading.Thread(target=lambda n=n: [say(f"compiling {n} of 4: line {i}") for i in range(50)])
               for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(stream.calls) == 200  # `print` made two writes per line: the text, then its newline
    assert all(call.startswith("compiling ") and call.endswith("\n") and call.count("\n") == 1
               for call in stream.calls)
    expected = {f"compiling {n} of 4: line {i}\n" for n in range(4) for i in range(50)}
    assert set(stream.calls) == expected


def test_quiet_and_json_say_nothing(monkeypatch):
    stream = Writes()
    monkeypatch.setattr(sys, "stdout", stream)
    for args in (argparse.Namespace(quiet=True, json=False), argparse.Namespace(quiet=False, json=True)):
        progress(args)("compiling 1 of 3: training step")
    assert stream.calls == []
