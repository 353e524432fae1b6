"""The host loop's decisions (`rlfit.run.after_step`), driven over many iterations as both loops drive them, against
a plain-Python reading of the rules: evaluation every k iterations and at the last, the time budget, the target
reward, the early stop, a non-finite iteration; and the seed group's non-finite lane, recorded while its siblings
go on."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from rlfit.run.progress import Progress
from rlfit.run.after_step import (NON_FINITE, Timing, advanced, after_eval, after_step, evaluation_due,
                                  stop_before_next)
from rlfit.run.evaluate import EvalMetrics
from rlfit.run.stopping import TIME_BUDGET_SAFETY, StopRules

STEPS = 100
"""Env steps per iteration."""


def metrics(finite: bool = True, episodes: int = 2) -> SimpleNamespace:
    return SimpleNamespace(all_finite=np.bool_(finite), episodes_finished=np.float32(episodes),
                           episode_return_sum=np.float32(3.0 * episodes), episode_length_sum=np.float32(10 * episodes))


def evaluation(reward: float) -> EvalMetrics:
    return EvalMetrics(np.float64(reward), np.float32(0.5), np.float32(7.0))


def reference(num_iterations: int, eval_every: int, rewards: list[float], non_finite_at: int | None,
              iteration_s: list[float], budget_s: float | None, target: float | None, patience: int,
              min_delta: float, signal_at: int | None) -> tuple[str | None, int, list[int], float | None]:
    """The rules read plainly: (stop, the iteration it ends at, the iterations evaluated, the best eval reward)."""
    best, without, evaluated, elapsed, slowest = None, 0, [], 0.0, 0.0
    for iteration in range(1, num_iterations + 1):
        if iteration == non_finite_at:
            return NON_FINITE, iteration, evaluated, best
        elapsed += iteration_s[iteration - 1]
        slowest = max(slowest, iteration_s[iteration - 1])
        last = iteration == num_iterations
        stop = None
        if last or (eval_every > 0 and iteration % eval_every == 0):
            reward = rewards[iteration - 1]
            evaluated.append(iteration)
            without = 0 if best is None or reward > best + min_delta else without + 1
            best = reward if best is None or reward > best else best
            if target is not None and reward >= target:
                stop = "target_reward"
            elif patience and without >= patience:
                stop = "early_stop"
        if last:
            return None, iteration, evaluated, best
        if stop is None and budget_s is not None and elapsed + TIME_BUDGET_SAFETY * slowest > budget_s:
            stop = "time_budget"
        if stop is None and iteration == signal_at:
            stop = "SIGTERM"
        if stop is not None:
            return stop, iteration, evaluated, best
    return None, num_iterations, evaluated, best


def drive(num_iterations: int, eval_every: int, rewards: list[float], non_finite_at: int | None,
          iteration_s: list[float], budget_s: float | None, target: float | None, patience: int, min_delta: float,
          signal_at: int | None) -> tuple[str | None, int, list[int], float | None, list[dict]]:
    """The loop's use of the functions (as `rlfit.run.loop.Runner._iterate` uses them), on a fake clock."""
    rules = StopRules(budget_s, patience, min_delta, target)
    progress, rows, evaluated, elapsed, slowest = Progress(), [], [], 0.0, 0.0
    while progress.iteration < num_iterations:
        finite = progress.iteration + 1 != non_finite_at
        progress = advanced(progress, STEPS)
        last = progress.iteration == num_iterations
        seconds = iteration_s[progress.iteration - 1]
        elapsed += seconds
        slowest = max(slowest, seconds)
        report = after_step(progress, metrics(finite), {"loss": 1.0}, Timing(seconds, elapsed), STEPS, last)
        if report.stop == NON_FINITE:
            assert report.train_row is None and report.eval_row is None
            return NON_FINITE, report.progress.iteration, evaluated, progress.best_eval_reward, rows
        rows.append(report.train_row)
        if evaluation_due(progress.iteration, num_iterations, eval_every):
            report = after_eval(report, evaluation(rewards[progress.iteration - 1]), rules, last)
            evaluated.append(report.eval_row["iteration"])
            rows.append(report.eval_row)
        progress = report.progress
        if last:
            break
        signal = "SIGTERM" if progress.iteration == signal_at else None
        stop = report.stop or stop_before_next(rules, elapsed, slowest, signal)
        if stop is not None:
            return stop, progress.iteration, evaluated, progress.best_eval_reward, rows
    return None, progress.iteration, evaluated, progress.best_eval_reward, rows


def cases(count: int):
    rng = np.random.default_rng(48)
    for _ in range(count):
        n = int(rng.integers(1, 30))
        yield dict(num_iterations=n, eval_every=int(rng.choice([0, 1, 2, 3, 7])),
                   rewards=[float(r) for r in np.round(rng.normal(0.0, 10.0, n), 1)],
                   non_finite_at=int(rng.integers(1, n + 1)) if rng.random() < 0.25 else None,
                   iteration_s=[float(s) for s in rng.uniform(0.5, 2.0, n)],
                   budget_s=float(rng.uniform(5, 60)) if rng.random() < 0.4 else None,
                   target=float(rng.uniform(5, 25)) if rng.random() < 0.4 else None,
                   patience=int(rng.choice([0, 1, 2, 4])), min_delta=float(rng.choice([0.0, 1.0, 5.0])),
                   signal_at=int(rng.integers(1, n + 1)) if rng.random() < 0.2 else None)


@pytest.mark.parametrize("case", list(cases(300)))
def test_the_loop_stops_where_the_rules_read_plainly_say(case):
    stop, at, evaluated, best, rows = drive(**case)
    assert (stop, at, evaluated, best) == reference(**case)
    train = [row for row in rows if "iteration_s" in row]
    assert [row["iteration"] for row in train] == list(range(1, len(train) + 1))
    assert all(row["env_steps"] == row["iteration"] * STEPS and row["episode/return"] == 3.0 for row in train)


def test_each_stop_is_reached_by_some_case():
    """The sweep above exercises every reason (a sweep that never stops would check little)."""
    reasons = {reference(**case)[0] for case in cases(300)}
    assert reasons == {None, NON_FINITE, "target_reward", "early_stop", "time_budget", "SIGTERM"}


def test_the_counters_are_new_objects_and_the_evaluation_updates_them():
    before = Progress(iteration=3, env_steps=300, best_eval_reward=5.0, events=[{"event": "x"}])
    after = advanced(before, STEPS)
    trained = after_step(after, metrics(), {}, Timing(2.0, 9.0), STEPS, False)
    assert trained.eval_row is None and trained.stop is None and trained.progress is after
    report = after_eval(trained, evaluation(4.0), StopRules(patience=1), False)
    assert (before.iteration, before.env_steps, before.last_eval_reward) == (3, 300, None)
    assert report.progress is not after and after.last_eval_reward is None
    assert report.progress.events == before.events and report.progress.events is not before.events
    assert (report.progress.iteration, report.progress.best_eval_reward, report.progress.last_eval_reward,
            report.progress.evals_without_improvement) == (4, 5.0, 4.0, 1)
    assert report.stop == "early_stop"
    assert report.train_row == {"iteration": 4, "env_steps": 400, "iteration_s": 2.0, "sps": 50.0, "wall_s": 9.0,
                                "episodes": 2, "episode/return": 3.0, "episode/length": 10.0}
    assert report.eval_row == {"iteration": 4, "env_steps": 400, "eval/episode_reward": 4.0,
                               "eval/episode_reward_std": 0.5, "eval/episode_length": 7.0}


def test_the_last_iteration_ends_the_run_whatever_the_rules_say():
    rules = StopRules(time_budget_s=1.0, patience=1, target_reward=-math.inf)
    trained = after_step(advanced(Progress(), STEPS), metrics(), {}, Timing(1.0, 1.0), STEPS, last=True)
    report = after_eval(trained, evaluation(0.0), rules, last=True)
    assert report.stop is None and report.eval_row is not None
    assert after_step(advanced(Progress(), STEPS), metrics(False), {}, Timing(1.0, 1.0), STEPS,
                      last=True).stop == NON_FINITE


def test_evaluation_due_every_k_and_at_the_last():
    due = [i for i in range(1, 11) if evaluation_due(i, 10, 3)]
    assert due == [3, 6, 9, 10]
    assert [i for i in range(1, 11) if evaluation_due(i, 10, 0)] == [10]


class Recorded:
    """A lane's sinks and checkpointer: what was written and saved."""

    def __init__(self):
        self.rows, self.saved = [], []

    def write(self, kind, row):
        self.rows.append((kind, row["iteration"]))

    def after_iteration(self, trainer, state, progress, final):
        self.saved.append(progress.iteration)

    def save(self, trainer, state, progress, force=False):
        self.saved.append(progress.iteration)

    def latest_step(self):
        return None


def lanes_of(tmp_path, count):
    """`count` lanes of a fake trainer (its metrics row a NaN loss where the iteration is not finite) and the runner
    of their loop, whose stepper takes lane i's part of a list as its i-th item."""
    from rlfit.run.lanes import Lane
    from rlfit.run.loop import Runner
    from rlfit.rundir.layout import RunDir

    run = SimpleNamespace(eval_every=0, early_stop_min_delta=0.0, save_interval=1)
    trainer = SimpleNamespace(plan=SimpleNamespace(env_steps_per_iteration=STEPS, num_iterations=5),
                              config=SimpleNamespace(run=run, algo="ppo"),
                              learner=SimpleNamespace(metrics_row=lambda m: {"loss": 1.0 if m.all_finite else math.nan}))
    lanes = [Lane(trainer, RunDir(tmp_path / f"seed-{i}"), Recorded(), Recorded()) for i in range(count)]
    stepper = SimpleNamespace(trainer=trainer, lane=lambda tree, index: tree[index])
    return lanes, Runner(stepper, lanes)


def test_a_non_finite_lane_is_recorded_and_its_sibling_goes_on(tmp_path):
    """The documented decision: a seed group's lane that becomes non-finite ends as a failure (nothing written,
    nothing saved) while the other lane logs and saves its iteration; a single run (one lane) raises
    NonFiniteError instead (tests/conformance/test_stops.py, for every algorithm)."""
    from rlfit.run.loop import NonFiniteError

    lanes, runner = lanes_of(tmp_path, 2)
    reports = runner._after_step(list(enumerate(lanes)), [metrics(finite=False), metrics()], Timing(1.0, 1.0), {},
                                 last=False)
    reports, _ = runner._evaluate_if_due(None, [None, None], reports, StopRules(), last=False)  # none due
    runner._save_due([None, None], reports, None, last=False, watch=None)
    failed, going = lanes
    assert failed.result.failure.startswith("training became non-finite at iteration 1: loss = nan; this state was "
                                            "not saved (no checkpoint was written yet); ")
    assert failed.sinks.rows == [] and failed.checkpointer.saved == []
    assert going.result is None and going.sinks.rows == [("train", 1)] and going.checkpointer.saved == [1]

    [alone], runner = lanes_of(tmp_path, 1)
    with pytest.raises(NonFiniteError, match="^training became non-finite at iteration 1: loss = nan;"):
        runner._after_step([(0, alone)], [metrics(finite=False)], Timing(1.0, 1.0), {}, last=False)
    assert alone.result is None and alone.sinks.rows == []


def test_a_rule_comes_before_the_budget_and_the_budget_before_a_signal():
    """The order the single run has always kept: a stopping rule's name, else the time budget, else the signal
    (a signal with a rule's stop exits 0, the rule named in summary.json)."""
    rules = StopRules(time_budget_s=10.0, target_reward=1.0)
    trained = after_step(advanced(Progress(), STEPS), metrics(), {}, Timing(1.0, 1.0), STEPS, last=False)
    report = after_eval(trained, evaluation(2.0), rules, last=False)
    assert report.stop == "target_reward"
    assert stop_before_next(rules, 9.0, 1.0, "SIGTERM") == "time_budget"
    assert stop_before_next(rules, 1.0, 1.0, "SIGTERM") == "SIGTERM"
    assert stop_before_next(rules, 1.0, 1.0, None) is None
