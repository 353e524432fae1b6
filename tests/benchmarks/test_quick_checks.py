"""What the benchmarks' `--quick` checks run: the toy environment, the smallest cases and fewest processes, so that
each check compiles a handful of small programs; the full runs keep their own environment, preset and cases."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TOY_ENV = "tests.toy_env:make"


@pytest.fixture
def script(monkeypatch):
    """`script(name)` imports benchmarks/NAME.py (sys.path, which a quick check extends, is restored after)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their neighbour common.py
    return importlib.import_module


def test_throughput_quick_runs_the_toy_environment_and_the_full_run_keeps_cartpole(script, monkeypatch):
    throughput = script("throughput")

    def parsed(*argv: str) -> tuple:
        monkeypatch.setattr(sys, "argv", ["throughput.py", *argv])
        args = throughput.parse_args()
        return args.env, args.preset, args.num_envs, args.steps, args.repeats, args.iterations

    assert parsed("--quick") == (TOY_ENV, "smoke", None, 100, 2, 2)
    assert parsed() == ("CartpoleBalance", "quick", None, 1000, 5, 6)
    assert parsed("--quick", "--env", "CheetahRun", "--preset", "quick") == ("CheetahRun", "quick", None, 100, 2, 2)


def test_scaling_quick_runs_one_child_on_two_devices_of_the_toy_environment(script):
    scaling = script("scaling")

    def filled(**given) -> tuple:
        args = argparse.Namespace(**{"quick": False, "env": None, "preset": None, "counts": None, "iterations": 5,
                                     **given})
        args = scaling.with_defaults(args)
        return args.env, args.preset, args.counts, args.iterations

    assert filled(quick=True) == (TOY_ENV, "smoke", [2], 1)
    assert filled() == ("CartpoleBalance", "quick", None, 5)
    assert filled(quick=True, env="CheetahRun", counts=[1, 4]) == ("CheetahRun", "smoke", [1, 4], 1)


def test_encoders_quick_runs_the_cheapest_encoder_unless_only_names_others(script):
    encoders = script("encoders")

    def labels(only: str, quick: bool) -> list[str]:
        return [case.label for case in encoders.chosen_cases(only, quick)]

    assert labels("", quick=True) == ["simple2dcnn"]
    assert labels("", quick=False) == ["simple2dcnn", "simple3dcnn", "r3d18", "timesformer_small", "timesformer_base"]
    assert labels("r3d18,simple3dcnn", quick=True) == ["simple3dcnn", "r3d18"]


def test_cpu_compile_options_quick_times_the_toy_environments_iteration(script):
    options = script("cpu_compile_options")
    assert [env for _, env, _ in options.QUICK_ITERATIONS.values()] == [TOY_ENV]
    assert [env for _, env, _ in options.ITERATIONS.values()] == ["CartpoleBalance", "CartpoleBalance"]
