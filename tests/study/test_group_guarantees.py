"""A seed group keeps a single run's guarantees, through the same host loop (`rlfit.run.loop`): out of device
memory it backs off to the algorithm's smaller sizes and finishes, each lane as its seed trained alone backs off;
a stop request leaves every lane a checkpoint within `run.stop_grace_s`, even while an iteration outlasts it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import jax
import pytest

from rlfit.sinks.jsonl import read_rows
from tests.conftest import TOY_ENV, cli_environment
from tests.study.test_experiment import SHORT

pytestmark = pytest.mark.slow

NOTE = {"seeds": [0, 1], "size": 2, "reason": "test"}


def summary(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def test_a_seed_group_out_of_memory_backs_off_as_each_seed_alone_does(tmp_path, monkeypatch):
    """RESOURCE_EXHAUSTED injected while compiling at the planned sizes, for the group's program and for a solo run's:
    both back off once to PPO's next smaller sizes and finish there; each lane records the event, its metrics and
    plan.json as the solo run of its seed does, and trains what that run trains (rounding apart)."""
    import rlfit
    from rlfit.algos.registry import algorithm
    from rlfit.config.schema import resolve
    from rlfit.planning.plan import make_plan
    from rlfit.run.seed_group import SeedGroup
    from rlfit.run.trainer import Trainer
    from rlfit.study.group_runner import train_seed_group

    config = resolve(TOY_ENV, "smoke", overrides=SHORT)
    plan = make_plan(config)
    smaller = algorithm("ppo").smaller_sizes(plan.sizes, "step").num_envs
    asked: list[int] = []

    def run_out_above(compile_program):
        def compile_or_run_out(self, *args, **kwargs):
            asked.append(self.trainer.plan.sizes.num_envs if isinstance(self, SeedGroup) else self.plan.sizes.num_envs)
            if asked[-1] > smaller:
                raise jax.errors.JaxRuntimeError(f"RESOURCE_EXHAUSTED: injected at num_envs={asked[-1]}")
            return compile_program(self, *args, **kwargs)
        return compile_or_run_out

    monkeypatch.setattr(SeedGroup, "compile", run_out_above(SeedGroup.compile))
    monkeypatch.setattr(Trainer, "compile", run_out_above(Trainer.compile))
    group = SeedGroup.build(Trainer.build(config, plan), (0, 1))
    results = train_seed_group(group, [config.replace(run={"seed": seed}) for seed in (0, 1)],
                               [tmp_path / f"seed-{seed}" for seed in (0, 1)], print, NOTE)
    assert asked == [plan.sizes.num_envs, smaller]
    alone = rlfit.train(TOY_ENV, "smoke", overrides=[*SHORT, "run.seed=1"], run_dir=tmp_path / "alone")
    assert [result.stopped_by for result in results] == [None, None]
    theirs = alone.summary
    for seed in (0, 1):
        ours = summary(tmp_path / f"seed-{seed}")
        assert [(e["event"], e["from"]["num_envs"], e["to"]["num_envs"]) for e in ours["events"]] == \
            [("out_of_memory_backoff", plan.sizes.num_envs, smaller)]
        assert ours["sizes"] == theirs["sizes"] and ours["iterations"] == theirs["iterations"]
        assert ours["seed_group"]["seeds"] == [0, 1]
        rows = read_rows(tmp_path / f"seed-{seed}" / "metrics.jsonl")
        assert [r["iteration"] for r in rows if r["kind"] == "train"] == list(range(1, ours["iterations"] + 1))
        assert [r["event"] for r in rows if r["kind"] == "event"] == ["out_of_memory_backoff"]
        written = json.loads((tmp_path / f"seed-{seed}" / "plan.json").read_text())
        assert written["sizes"]["num_envs"] == smaller and written["extra"]["seed_group"] == NOTE
    assert summary(tmp_path / "seed-1")["final_eval_reward"] == pytest.approx(theirs["final_eval_reward"], rel=1e-4)


def test_sigterm_during_a_long_iteration_of_a_seed_group_saves_every_lane_within_the_grace(tmp_path):
    """Iterations of about 10-15 s with a 2 s grace (`tests.seed_groups.SLOW_GROUP`): SIGTERM early in the second
    iteration ends the process with 143 without waiting for that iteration, each lane's first iteration saved from
    the watcher's host copy and its summary saying why (the group's stop grace, as a single run's:
    tests/run/test_stop_grace.py)."""
    process = subprocess.Popen([sys.executable, "-m", "tests.seed_groups", str(tmp_path)], env=cli_environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = []
    while not said or "keeping a host copy" not in said[-1]:  # said once the first iteration's copy is taken
        said.append(process.stdout.readline())
        assert said[-1], process.communicate(timeout=60)  # the process ended
    rows = [row for seed in (0, 1) for row in read_rows(tmp_path / f"seed-{seed}" / "metrics.jsonl")
            if row.get("kind") == "train"]
    assert len(rows) == 2, said
    time.sleep(1.0)  # the second iteration is under way
    asked = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    answered = time.monotonic() - asked
    assert process.returncode == 143, err
    assert answered < 2 * min(row["iteration_s"] for row in rows), (answered, err)  # 2 lanes saved on a loaded CPU
    assert "stopped by SIGTERM within run.stop_grace_s=2: saved iteration 1" in err  # by the watcher
    for seed in (0, 1):
        lane = tmp_path / f"seed-{seed}"
        record = summary(lane)
        assert record["stopped_by"] == "SIGTERM" and record["iterations"] == 1
        # the second iteration, under way, was not waited for: neither logged nor saved
        assert [row["iteration"] for row in read_rows(lane / "metrics.jsonl") if row["kind"] == "train"] == [1]
        assert record["seed_group"]["seeds"] == [0, 1]
        assert sorted(p.name for p in (lane / "checkpoints").iterdir() if not p.name.startswith("."))[-1] == "00000001"
