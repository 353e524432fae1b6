"""Helpers for the checkpoint/resume tests: run the CLI as a user does, on the toy environment.

`ToyCli.run` calls the CLI's `main` in the test's process when given `capfd` (the same code path as
`python -m rlfit`, without an interpreter start per command: `tests.conftest.cli_in_process`), else a
subprocess; `ToyCli.start` always starts a real process (to signal, kill or race it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOY = ["tests.toy_env:make", "--preset", "smoke", "--set", "env.episode_length=50"]


def cli_env(tmp_path: Path) -> dict[str, str]:
    """The test session's environment (its compile cache, tests/conftest.py, shared with the in-process runs) with
    the repo root on PYTHONPATH (for tests.toy_env)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def rlfit(tmp_path: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """Runs `python -m rlfit ARGS` to completion, capturing output."""
    return subprocess.run([sys.executable, "-m", "rlfit", *args], cwd=tmp_path, env=cli_env(tmp_path),
                          capture_output=True, text=True, timeout=600, **kwargs)


def start_rlfit(tmp_path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rlfit", *args], cwd=tmp_path, env=cli_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def train_rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if row["kind"] == "train"]


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` with its bytes, to prove nothing changed."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ckpt")


class ToyCli:
    """The helpers above bound to one temporary directory and an algorithm (a fixture, since test modules import
    nothing). Both algorithms' smoke presets collect 64 env steps per iteration, so iteration counts agree.
    With `capfd`, `run` runs the command in this process (see the module's docstring)."""

    def __init__(self, tmp_path: Path, algo: str = "ppo", capfd=None):
        self.tmp_path = tmp_path
        self.algo = algo
        self.toy = TOY + ["--algo", algo]
        self.capfd = capfd

    def run(self, *args: str) -> subprocess.CompletedProcess:
        if self.capfd is not None:
            from tests.conftest import cli_in_process

            return cli_in_process(self.capfd, *args, cwd=self.tmp_path)
        return rlfit(self.tmp_path, *args)

    def start(self, *args: str) -> subprocess.Popen:
        return start_rlfit(self.tmp_path, *args)

    summary = staticmethod(summary)
    train_rows = staticmethod(train_rows)
    snapshot = staticmethod(snapshot)


@pytest.fixture
def cli(tmp_path, capfd) -> ToyCli:
    return ToyCli(tmp_path, capfd=capfd)


@pytest.fixture(params=["ppo", "sac"])
def any_cli(tmp_path, request, capfd) -> ToyCli:
    """The same test for every algorithm."""
    return ToyCli(tmp_path, request.param, capfd=capfd)
