"""benchmarks/gc_thresholds.py's reading of its cases (ENV:PRESET[:OVERRIDE...], with environment names that hold a
colon themselves) and its refusal of bad input: one line, exit 2, no record written."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def module(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports its neighbour common.py
    return importlib.import_module("gc_thresholds")


@pytest.mark.parametrize("case, expected", [
    ("CartpoleBalance:smoke", ("CartpoleBalance", "smoke", [])),
    ("G1JoystickFlatTerrain:smoke:env.observation_set=robot",
     ("G1JoystickFlatTerrain", "smoke", ["env.observation_set=robot"])),
    ("tests.toy_env:make:smoke", ("tests.toy_env:make", "smoke", [])),
    ("gymnax:Pendulum-v1:quick:run.seed=3:ppo.num_envs=8", ("gymnax:Pendulum-v1", "quick", ["run.seed=3", "ppo.num_envs=8"])),
    ("smoke", ("", "", [])),
    ("smoke:run.seed=3", ("", "", ["run.seed=3"])),
])
def test_a_case_splits_into_environment_preset_and_overrides(module, case, expected):
    assert module.split_case(case) == expected


@pytest.mark.parametrize("args, says", [(["--repeats", "0"], "--repeats must be at least 1, got 0"),
                                        (["--cases", "smoke"], "a case is ENV:PRESET[:OVERRIDE...], got 'smoke'")])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, args, says):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gc_thresholds.py"), *args], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip() == f"gc_thresholds.py: error: {says}", done.stderr
    assert done.stdout == ""
