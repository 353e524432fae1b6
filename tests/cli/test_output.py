"""rlfit.cli.output: progress lines are each one write, so lines said from several threads at once (the compile
threads) never run together; the report commands' shared `--out` and `--seed` checks."""

from __future__ import annotations

import argparse
import sys
import threading

import pytest

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


@pytest.mark.parametrize("command", ["sim2sim", "transfer-check"])
def test_report_commands_refuse_a_missing_out_folder_and_a_bad_seed_alike(command, tmp_path, capsys):
    """`rlfit sim2sim` and `rlfit transfer-check` share one check (`report_folder`): the same one line, exit code 2,
    before anything is loaded or written."""
    from rlfit.cli import main

    missing = tmp_path / "no such folder"
    assert main([command, str(tmp_path), "--out", str(missing)]) == 2
    assert capsys.readouterr().err == f"rlfit: error: --out {missing} is not a folder; create it first\n"
    assert main([command, str(tmp_path), "--seed", str(2**32)]) == 2
    assert capsys.readouterr().err == (f"rlfit: error: --seed must be an integer from 0 to {2**32 - 1} (2^32 - 1), "
                                       f"got {2**32}\n")
    assert list(tmp_path.iterdir()) == []


def test_report_folder_is_out_when_given_else_the_run_directory(tmp_path):
    from rlfit.cli.output import report_folder

    run_dir, out = tmp_path / "run", tmp_path / "out"
    out.mkdir()
    assert report_folder(argparse.Namespace(seed=0, out=None, run_dir=run_dir)) == run_dir
    assert report_folder(argparse.Namespace(seed=0, out=out, run_dir=run_dir)) == out
