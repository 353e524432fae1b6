"""benchmarks/algo_compare.py's quick check as the script sets it up, without training: the toy environment's
experiment, which rlfit's manifest rules accept, its schedule (one round of FastTD3), and the target's comparison of
FastTD3 with SAC, which the quick check's one algorithm leaves out."""

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
    assert [variant["set"]["algo"] for variant in manifest["variants"]] == ["fasttd3"]
    assert manifest["set"]["run.time_budget"] == "2s"
    assert str(REPO_ROOT) in os.environ["PYTHONPATH"].split(os.pathsep), "the runs' processes cannot import the toy env"


def test_the_quick_check_runs_its_algorithm_in_one_round(algo_compare, monkeypatch):
    args = quick_args(algo_compare, monkeypatch)
    assert algo_compare.rounds(algo_compare.schedule(args), args.concurrent) == [[(TOY_ENV, "fasttd3", 0)]]
    args.algos = None  # the full run's three, rotated per seed
    assert algo_compare.rounds(algo_compare.schedule(args), args.concurrent) == [
        [(TOY_ENV, "fasttd3", 0), (TOY_ENV, "sac", 0), (TOY_ENV, "ppo", 0)]]


def test_a_playground_name_keeps_its_experiment_name(algo_compare, monkeypatch):
    args = quick_args(algo_compare, monkeypatch)
    assert algo_compare.manifest("CartpoleBalance", args)["name"] == "algo_compare_CartpoleBalance"
    assert algo_compare.manifest(TOY_ENV, args)["name"] == "algo_compare_tests.toy_env-make"


def test_the_target_compares_fasttd3_with_sac_on_each_environment(algo_compare):
    def statistics(fasttd3: float, sac: float):  # one seed each: the IQM is the seed's final-policy return
        return algo_compare.statistics([{"algo": algo, "final_policy_reward": reward, "env_steps": 64}
                                        for algo, reward in (("fasttd3", fasttd3), ("sac", sac))])

    reports = {"a": statistics(2.0, 1.0), "b": statistics(1.0, 1.0), "c": statistics(0.5, 1.0)}
    assert {algo: estimate["iqm"] for algo, estimate in reports["a"]["estimates"].items()} == {"fasttd3": 2.0, "sac": 1.0}
    assert algo_compare.target(reports) == {"fasttd3_iqm_at_least_sac": {"a": True, "b": True, "c": False}, "met": True}
    assert algo_compare.target({**reports, "b": statistics(0.9, 1.0)})["met"] is False
    assert algo_compare.target({"a": reports["a"]})["met"] is None  # fewer than the three environments measured
