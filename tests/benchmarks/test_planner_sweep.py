"""benchmarks/planner_sweep.py's bookkeeping per budget, with the plan and the training runs replaced by fakes: the
planner's own run is the sweep's point at the size it chose (not trained twice), other sizes are trained, and a size
measured under an earlier budget is reused."""

from __future__ import annotations

import argparse
import sys

import pytest

from tests.conftest import REPO_ROOT


@pytest.fixture
def planner_sweep(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    import planner_sweep as module

    yield module
    sys.modules.pop("planner_sweep", None)


BASE = {"num_envs": 512, "batch_size": 256, "num_minibatches": 16, "unroll_length": 30}


def fake_run(sizes: dict, sps: float) -> dict:
    return {"returncode": 0, "out_of_memory": False, "error": None, "sizes": dict(sizes), "sps_median": sps,
            "sps_per_iteration": [sps], "compile_s": 1.0, "predicted_bytes": None, "device_peak_bytes": None,
            "wall_s": 1.0}


def test_the_planners_run_is_the_sweep_point_at_its_size_and_other_sizes_are_trained(planner_sweep, monkeypatch,
                                                                                      tmp_path):
    trained = []

    def train(env, preset, overrides, sizes, auto_args, iterations, steps, fraction, work, timeout):
        trained.append(None if sizes is None else sizes["num_envs"])
        chosen = sizes or BASE  # the planner's run (`--num-envs auto`) trains the plan's choice
        return fake_run(chosen, {256: 900.0, 512: 1000.0}.get(chosen["num_envs"], 0.0))

    monkeypatch.setattr(planner_sweep, "plan_choice", lambda *a: {
        "chosen": {**BASE, "predicted_bytes": 10}, "budget_bytes": 100, "requested": BASE})
    monkeypatch.setattr(planner_sweep, "train", train)
    args = argparse.Namespace(set=[], env="E", preset="quick", iterations=2, min_steps=0, sweep_min=256, sweep_max=512,
                              timeout=60)
    measured: dict = {}
    record = planner_sweep.measure_budget("1", {"bytes": 100, "fraction": None}, args, False, measured, tmp_path)
    assert trained == [None, 256]  # the planner's run, then the sweep's 256 only: 512 is the planner's run
    points = {point["num_envs"]: point for point in record["sweep"]}
    assert points[512]["planner_run"] and points[512]["sps_median"] == 1000.0 and "planner_run" not in points[256]
    assert record["best"] == {"num_envs": 512, "sps_median": 1000.0} and record["ratio_to_best"] == 1.0

    trained.clear()  # a second budget: both sizes were measured under the first, only the planner's run is new
    record = planner_sweep.measure_budget("2", {"bytes": 200, "fraction": None}, args, False, measured, tmp_path)
    assert trained == [None]
    assert all(point["reused_from"] == "1" for point in record["sweep"])


def test_a_planner_run_that_failed_is_not_a_sweep_point(planner_sweep, monkeypatch, tmp_path):
    trained = []

    def train(env, preset, overrides, sizes, auto_args, iterations, steps, fraction, work, timeout):
        trained.append(None if sizes is None else sizes["num_envs"])
        return {**fake_run(sizes or BASE, 5.0), "returncode": 1 if sizes is None else 0}

    monkeypatch.setattr(planner_sweep, "plan_choice", lambda *a: {
        "chosen": {**BASE, "predicted_bytes": 10}, "budget_bytes": 100, "requested": BASE})
    monkeypatch.setattr(planner_sweep, "train", train)
    args = argparse.Namespace(set=[], env="E", preset="quick", iterations=2, min_steps=0, sweep_min=512, sweep_max=512,
                              timeout=60)
    record = planner_sweep.measure_budget("1", {"bytes": 100, "fraction": None}, args, False, {}, tmp_path)
    assert trained == [None, 512] and "planner_run" not in record["sweep"][0]
