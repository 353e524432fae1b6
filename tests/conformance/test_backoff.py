"""Out-of-memory back-off, for every algorithm: XLA's RESOURCE_EXHAUSTED while the step compiles at the planned
sizes makes the runner take the algorithm's next smaller sizes (`smaller_sizes`), rebuild and finish the run there,
recording the event in the summary, the metrics and plan.json; with `run.oom_backoff=false` the run stops instead
with exit code 5 and one line. The error is injected in this process (a genuine one, from a capped address space,
is tests/run/test_oom_backoff.py's, for PPO): what is checked here is the runner's contract with each algorithm, for
a single run (a group of one lane) and a seed group of two."""

from __future__ import annotations

import json

import jax
import pytest

from rlfit.algos.registry import algorithm
from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer
from tests.checkpoints.conftest import TOY, ToyCli
from tests.conformance.conftest import ALGORITHM_NAMES


def planned_num_envs(algo: str) -> tuple[int, int]:
    """The smoke preset's num_envs for the toy run, and the algorithm's next smaller one after running out of memory
    in the step."""
    config = resolve(TOY[0], "smoke", overrides=[f"algo={algo}", "env.episode_length=50"])
    sizes = make_plan(config).sizes
    smaller = algorithm(algo).smaller_sizes(sizes, "step")
    assert smaller is not None and smaller.num_envs < sizes.num_envs, (algo, sizes, smaller)
    return sizes.num_envs, smaller.num_envs


@pytest.fixture
def out_of_memory_above(monkeypatch):
    """`out_of_memory_above(n)`: from now on, compiling a trainer of more than n environments raises XLA's
    RESOURCE_EXHAUSTED; returns the list of num_envs each compile was asked for."""
    asked: list[int] = []
    real_compile = Trainer.compile

    def arm(limit: int) -> list[int]:
        def compile_or_run_out(self, state=None, say=None, **options):
            asked.append(self.plan.sizes.num_envs)
            if self.plan.sizes.num_envs > limit:
                raise jax.errors.JaxRuntimeError(f"RESOURCE_EXHAUSTED: injected at num_envs={self.plan.sizes.num_envs}")
            return real_compile(self, state, say, **options)

        monkeypatch.setattr(Trainer, "compile", compile_or_run_out)
        return asked

    return arm


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_a_run_out_of_memory_backs_off_to_the_algorithms_smaller_sizes_and_finishes(tmp_path, capfd,
                                                                                    out_of_memory_above, algo):
    planned, smaller = planned_num_envs(algo)
    asked = out_of_memory_above(smaller)
    cli = ToyCli(tmp_path, algo, capfd=capfd)
    run = tmp_path / "run"
    done = cli.run("train", *cli.toy, "--timesteps", "256", "--set", "run.eval_every=0", "--run-dir", str(run),
                   "--quiet")
    assert done.returncode == 0, done.stderr
    assert asked[:2] == [planned, smaller] and set(asked[2:]) <= {smaller}

    summary = cli.summary(run)
    events = summary["events"]
    assert [(e["event"], e["from"]["num_envs"], e["to"]["num_envs"]) for e in events] == \
        [("out_of_memory_backoff", planned, smaller)]
    assert "RESOURCE_EXHAUSTED" in events[0]["error"]
    assert summary["sizes"]["num_envs"] == smaller and summary["iterations"] >= 1
    assert summary["env_steps"] >= 256
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "time"} for r in rows if r["kind"] == "event"] == \
        [{"kind": "event", **e} for e in events]
    assert [r["iteration"] for r in rows if r["kind"] == "train"] == list(range(1, summary["iterations"] + 1))
    plan = json.loads((run / "plan.json").read_text())
    assert plan["sizes"]["num_envs"] == smaller and "out of memory" in plan["reasons"][-1]


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_a_run_out_of_memory_without_back_off_stops_with_exit_code_5_and_one_line(tmp_path, capfd,
                                                                                  out_of_memory_above, algo):
    planned, smaller = planned_num_envs(algo)
    out_of_memory_above(smaller)
    cli = ToyCli(tmp_path, algo, capfd=capfd)
    run = tmp_path / "run"
    done = cli.run("train", *cli.toy, "--timesteps", "256", "--set", "run.oom_backoff=false", "--run-dir", str(run),
                   "--quiet")
    assert done.returncode == 5
    assert done.stderr.strip().splitlines() == [
        f"rlfit: error: out of device memory at {algo}.num_envs={planned} (run.oom_backoff=false); lower "
        f"{algo}.num_envs, use --num-envs auto, or set run.oom_backoff=true"]
    assert not (run / "summary.json").exists()
    assert json.loads((run / "plan.json").read_text())["sizes"]["num_envs"] == planned


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_a_seed_group_out_of_memory_backs_off_to_the_algorithms_smaller_sizes_and_finishes(tmp_path, monkeypatch,
                                                                                           out_of_memory_above, algo):
    """The same contract for a group of several lanes (a single run is the group of one above): the group's program
    runs out of memory at the planned sizes, and every lane records the back-off and finishes at the smaller ones."""
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.run.seed_group import SeedGroup
    from rlfit.study.group_runner import train_seed_group

    planned, smaller = planned_num_envs(algo)
    asked = out_of_memory_above(smaller)  # a solo run's programs; the group's below
    real_compile = SeedGroup.compile

    def compile_or_run_out(self, state=None):
        asked.append(self.trainer.plan.sizes.num_envs)
        if self.trainer.plan.sizes.num_envs > smaller:
            raise jax.errors.JaxRuntimeError(f"RESOURCE_EXHAUSTED: injected at num_envs={asked[-1]}")
        return real_compile(self, state)

    monkeypatch.setattr(SeedGroup, "compile", compile_or_run_out)
    config = resolve(TOY[0], "smoke", overrides=[f"algo={algo}", "env.episode_length=50", "run.num_timesteps=256",
                                                 "run.eval_every=0"])
    configure_jax(config.run.precision)
    note = {"seeds": [0, 1], "size": 2, "reason": "test"}
    results = train_seed_group(SeedGroup.build(Trainer.build(config, make_plan(config)), (0, 1)),
                               [config.replace(run={"seed": seed}) for seed in (0, 1)],
                               [tmp_path / f"seed-{seed}" for seed in (0, 1)], lambda _: None, note)
    assert asked == [planned, smaller] and [result.failure for result in results] == [None, None]
    for seed in (0, 1):
        run = tmp_path / f"seed-{seed}"
        summary = json.loads((run / "summary.json").read_text())
        assert [(e["event"], e["from"]["num_envs"], e["to"]["num_envs"]) for e in summary["events"]] == \
            [("out_of_memory_backoff", planned, smaller)]
        assert summary["sizes"]["num_envs"] == smaller and summary["env_steps"] >= 256
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [r["iteration"] for r in rows if r["kind"] == "train"] == list(range(1, summary["iterations"] + 1))
        assert [r["event"] for r in rows if r["kind"] == "event"] == ["out_of_memory_backoff"]
        plan = json.loads((run / "plan.json").read_text())
        assert plan["sizes"]["num_envs"] == smaller and plan["extra"]["seed_group"] == note
