"""What the host does after each compiled iteration, as pure functions of a few numbers: the rows to log, the
evaluation's bookkeeping and whether (and why) the run stops. The host loop (`rlfit.run.loop.Runner`) applies them
per lane, for a single run (one lane) and a seed group (several) alike:

    progress = advanced(progress, env_steps_per_iteration)
    report = after_step(progress, metrics, algorithm_row, timing, env_steps, last)    # train row, or NON_FINITE
    write the train row
    if evaluation_due(progress.iteration, num_iterations, eval_every):
        report = after_eval(report, evaluate(state), rules, last)                     # eval row, counters, stop
        write the eval row
    save the checkpoint that is due
    stop = report.stop or stop_before_next(rules, elapsed_s, slowest_step_s, signal)  # unless last

Three steps, not one function, because what they decide is written or measured in between: the train row is
shown before a (maybe long) evaluation, the checkpoint copies the rows written before it, and the time budget
counts the slowest save, this one included.

Stop reasons (summary.json's `stopped_by`): 'non_finite' (never written: see below), 'target_reward',
'early_stop', 'time_budget', a signal's name ('SIGTERM', 'SIGINT'), OTHER_PROCESS; None at the plan's end.

The non-finite decision. An iteration whose metrics are not all finite gives `stop == NON_FINITE` and no rows: its
state is thrown away, never saved or logged. A single run raises `NonFiniteError` (exit code 6, the checkpoints
before it intact). A seed group's lane records the failure (`rlfit.run.loop.RunResult.failure`) and the other lanes go on: the
lanes share one program, and one seed's divergence must not end its siblings (an experiment expects some seeds
to diverge and reports them as failed trials, as it does for a single run's NonFiniteError).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from rlfit.algos.contract import StepMetrics
from rlfit.run.evaluate import EvalMetrics, randomized_row
from rlfit.run.progress import Progress
from rlfit.run.stopping import StopRules

NON_FINITE = "non_finite"
"""The stop of an iteration that produced NaN or infinity (its metrics' `all_finite` is false)."""
OTHER_PROCESS = "a stop on another process"
"""Over several processes: this process had no reason to stop, another had one (every process stops together)."""


class Timing(NamedTuple):
    """The clock readings a train row reports (seconds)."""

    iteration_s: float
    """The compiled iteration's time (the step and moving its metrics to the host)."""
    wall_s: float
    """Since the loop started, at the row."""


MetricsRow = dict[str, float | int]
"""A metrics.jsonl row: its fields by name (`iteration`, `sps`, `loss/...`, `eval/...`)."""


class StepReport(NamedTuple):
    """What `after_step` decided about one iteration."""

    progress: Progress
    """The counters after the iteration and its evaluation (a new object)."""
    train_row: MetricsRow | None
    """metrics.jsonl's `train` row; None when the iteration was not finite (nothing is logged)."""
    eval_row: MetricsRow | None
    """metrics.jsonl's `eval` row when the iteration was evaluated, else None."""
    stop: str | None
    """NON_FINITE, 'target_reward', 'early_stop', or None (go on; at the plan's last iteration always None unless
    NON_FINITE: the run ends there anyway)."""


def advanced(progress: Progress, env_steps: int) -> Progress:
    """The counters one iteration of `env_steps` environment steps later (a new object)."""
    return dataclasses.replace(progress, iteration=progress.iteration + 1, env_steps=progress.env_steps + env_steps,
                               events=list(progress.events))


def evaluation_due(iteration: int, num_iterations: int, eval_every: int) -> bool:
    """Whether iteration `iteration` (counted from 1) is evaluated: every `eval_every` (0: never) and the last."""
    return iteration == num_iterations or bool(eval_every and iteration % eval_every == 0)


def after_step(progress: Progress, metrics: StepMetrics, algorithm_row: MetricsRow, timing: Timing, env_steps: int,
               last: bool) -> StepReport:
    """The train row after iteration `progress.iteration` (already `advanced`), or NON_FINITE.

    `metrics`: the iteration's host `IterationMetrics` (episode sums and `all_finite`); `algorithm_row`: the
    algorithm's own fields (`Learner.metrics_row`); `env_steps`: the iteration's environment steps; `last`: the
    plan's last iteration (no stop then but NON_FINITE: the run ends there anyway).
    """
    if not bool(metrics.all_finite):
        return StepReport(progress, None, None, NON_FINITE)
    return StepReport(progress, train_row(progress, metrics, algorithm_row, timing.iteration_s, timing.wall_s,
                                          env_steps), None, None)


def after_eval(report: StepReport, evaluation: EvalMetrics, rules: StopRules, last: bool) -> StepReport:
    """`report` (a finite iteration's) after its evaluation (host `EvalMetrics`): the eval row, the counters it
    updates, and 'target_reward' or 'early_stop' when a rule says so (never at the plan's `last` iteration)."""
    progress, eval_row = evaluated(report.progress, evaluation, rules.min_delta)
    assert progress.last_eval_reward is not None, "an evaluated progress has its last eval reward"
    stop = rules.after_eval(progress.last_eval_reward, progress.evals_without_improvement)
    return StepReport(progress, report.train_row, eval_row, None if last else stop)


def stop_before_next(rules: StopRules, elapsed_s: float, slowest_step_s: float, signal: str | None) -> str | None:
    """After the iteration's save (not at the plan's last iteration): 'time_budget' when one more step would not fit
    (`StopRules.before_next`), else the signal's name when one was received, else None."""
    return rules.before_next(elapsed_s, slowest_step_s) or signal


def train_row(progress: Progress, metrics: StepMetrics, algorithm_row: MetricsRow, iteration_s: float, wall_s: float,
              steps: int) -> MetricsRow:
    """The metrics.jsonl row of one iteration (`sps` = env steps of the iteration / its wall time).

    `algorithm_row` holds the algorithm's own fields (`Learner.metrics_row`); an `updates` count among them
    also gives `updates_per_s`.
    """
    row: MetricsRow = {
        "iteration": progress.iteration,
        "env_steps": progress.env_steps,
        "iteration_s": iteration_s,
        "sps": steps / iteration_s,
        "wall_s": wall_s,
    }
    row.update(algorithm_row)
    if "updates" in row:
        row["updates_per_s"] = row["updates"] / iteration_s
    episodes = float(metrics.episodes_finished)
    row["episodes"] = int(episodes)
    if episodes > 0:
        row["episode/return"] = float(metrics.episode_return_sum) / episodes
        row["episode/length"] = float(metrics.episode_length_sum) / episodes
    return row


def evaluated(progress: Progress, result: EvalMetrics, min_delta: float) -> tuple[Progress, MetricsRow]:
    """The counters after an evaluation's result (host `EvalMetrics`; a new object) and its metrics.jsonl row."""
    reward = float(result.episode_reward)
    row: MetricsRow = {"iteration": progress.iteration, "env_steps": progress.env_steps, "eval/episode_reward": reward,
           "eval/episode_reward_std": float(result.episode_reward_std),
           "eval/episode_length": float(result.episode_length)}
    description_length = progress.last_description_length_bits
    if result.rate_bits is not None:  # the policy's description length of an observation
        description_length = row["eval/description_length_bits"] = float(result.rate_bits)
    row.update(randomized_row(result))  # with domain randomization: the same on freshly drawn models
    best = progress.best_eval_reward
    progress = dataclasses.replace(
        progress, events=list(progress.events), last_eval_reward=reward,
        evals_without_improvement=StopRules.evals_without_improvement(progress.evals_without_improvement, reward,
                                                                      best, min_delta),
        best_eval_reward=reward if best is None or reward > best else best,
        last_description_length_bits=description_length,
        last_randomized_eval_reward=row.get("eval/randomized/episode_reward"))
    return progress, row


def first_non_finite(row: MetricsRow) -> str:
    """The first non-finite value of an algorithm's metrics row ('loss/critic = nan'), else 'the parameters'."""
    for name, value in row.items():
        if isinstance(value, float) and not np.isfinite(value):
            return f"{name} = {value}"
    return "the parameters"
