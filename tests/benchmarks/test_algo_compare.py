"""benchmarks/algo_compare.py's quick check as the script sets it up, without training: the toy environment's
experiment, which rlfit's manifest rules accept, and its schedule (one round of FastTD3 and SAC at once)."""

from __future__ import annotations

import importlib
import os
import sys

import pytest
import yaml

from tests.conftest import REPO_ROOT, TOY_ENV

BENCHMARKS = REPO_ROOT / "benchmarks"


@pytest.fixture
def algo_compare(monkeypatch):
    """The script as a module; what its quick mode changes in the environment (PYTHONPATH) is undone after."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their neighbours (common)
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    return importlib.import_module("algo_compare")


def quick_args(algo_compare, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["algo_compare.py", "--quick"])
    return algo_compare.parse_args()


def test_the_quick_check_starts_an_experiment_on_the_toy_environment(algo_compare, monkeypatch, tmp_path):
    args = quick_args(algo_compare, monkeypatch)
    experiments = algo_compare.start_experiments(args, tmp_path)
    assert list(experiments) == [TOY_ENV]
    manifest = yaml.safe_load((experiments[TOY_ENV] / "manifest.yaml").read_text())
    assert (manifest["env"], manifest["preset"], manifest["seeds"]) == (TOY_ENV, "smoke", [0])
    assert [variant["set"]["algo"] for variant in manifest["variants"]] == ["fasttd3", "sac"]
    assert manifest["set"]["run.time_budget"] == "2s"
    assert str(REPO_ROOT) in os.environ["PYTHONPATH"].split(os.pathsep), "the runs' processes cannot import the toy env"


def test_the_quick_check_runs_its_two_algorithms_in_one_round(algo_compare, monkeypatch):
    args = quick_args(algo_compare, monkeypatch)
    assert algo_compare.rounds(algo_compare.schedule(args), args.concurrent) == [
        [(TOY_ENV, "fasttd3", 0), (TOY_ENV, "sac", 0)]]
    args.algos = None  # the full run's three, rotated per seed
    assert algo_compare.rounds(algo_compare.schedule(args), args.concurrent) == [
        [(TOY_ENV, "fasttd3", 0), (TOY_ENV, "sac", 0), (TOY_ENV, "ppo", 0)]]


def test_a_playground_name_keeps_its_experiment_name(algo_compare, monkeypatch):
    args = quick_args(algo_compare, monkeypatch)
    assert algo_compare.manifest("CartpoleBalance", args)["name"] == "algo_compare_CartpoleBalance"
    assert algo_compare.manifest(TOY_ENV, args)["name"] == "algo_compare_tests.toy_env-make"
