"""The host loop of a seed group: the seeds of one config trained in one compiled program (`SeedGroup`), each
seed (a lane) writing its own ordinary run directory as a run of that seed alone would: config.yaml,
plan.json, metrics.jsonl, TensorBoard, checkpoints, the policy, summary.json.

    fresh lanes: save iteration 0 -> for each iteration: step every seed -> per lane: log, (evaluate),
    (checkpoint), (stop) -> per lane: summary.json

What each lane logs and when it stops are the single run's pure functions (`rlfit.run.after_step`), so a lane
and its seed trained alone write the same rows and stop by the same rules:
- A lane that reaches `run.target_reward` or its early stop ends there, with a checkpoint and its summary;
  one that becomes non-finite is recorded as failed (`LaneOutcome.failure`) where a solo run raises
  NonFiniteError (the decision is documented in `rlfit.run.after_step`): neither saves the bad state. The
  program keeps computing finished lanes (their results are dropped) until every lane has ended, so a lane's
  arithmetic never depends on when the others end.
- `run.time_budget` and SIGTERM/SIGINT end every lane with a checkpoint; the loop returns the stop, and its
  caller raises the signal's exit code once every lane's files are closed.
- Out of device memory raises `GroupOutOfMemory`: every lane has a checkpoint (iteration 0 at least), and the
  experiment resumes each one on its own, where the solo runner backs off to smaller sizes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax

from rlfit.run.session import open_sinks
from rlfit.checkpoints.schedule import Checkpointer
from rlfit.config.schema import Config
from rlfit.errors import UserError
from rlfit.rundir.layout import RunDir, write_json
from rlfit.run.new_run import create_run_dir
from rlfit.run.after_step import (NON_FINITE, Progress, Timing, advanced, after_eval, after_step, evaluation_due,
                                  first_non_finite, stop_before_next)
from rlfit.run.signals import StopFlag, raise_if_signalled
from rlfit.planning.plan import Plan, PlanExtra
from rlfit.run.summary import run_summary
from rlfit.run.summary_record import LaneSummary, extended
from rlfit.sinks import Sinks
from rlfit.run.stopping import StopRules
from rlfit.study.seed_group import SeedGroup, lane


class GroupOutOfMemory(Exception):
    """The group ran out of device memory; every lane's run directory holds a checkpoint to resume alone."""


@dataclass
class LaneOutcome:
    """How one lane ended: its summary (written), or the failure a solo run would have raised."""

    path: Path
    summary: dict[str, Any] | None = None
    failure: str | None = None


@dataclass
class Lane:
    """One seed of the group and what it writes."""

    trainer: Any
    """The group's Trainer with this seed's config (what its checkpoints and policy file record)."""
    directory: RunDir
    sinks: Sinks
    checkpointer: Checkpointer
    progress: Progress = field(default_factory=Progress)
    outcome: LaneOutcome | None = None
    """None while the lane trains."""

    def __post_init__(self) -> None:
        self.session_start_steps = self.progress.env_steps


def train_seed_group(group: SeedGroup, configs: Sequence[Config], paths: Sequence[Path],
                     say: Callable[[str], None], compile_s: float, reused: bool,
                     note: dict[str, Any]) -> list[LaneOutcome]:
    """Creates a new run directory per config (lane i: `configs[i]`, seed `group.seeds[i]`, at `paths[i]`) and
    trains them all from their fresh states in `group`'s compiled program (compiled already); `note` goes into
    each summary.json as `seed_group`."""
    trainer = group.trainer
    with contextlib.ExitStack() as stack:
        lanes = []
        for config, path in zip(configs, paths):
            directory, lock = create_run_dir(path, config)
            stack.enter_context(lock)
            write_json(directory.plan, group_plan(trainer.plan, note).to_dict())
            lane_trainer = dataclasses.replace(trainer, config=config)
            sinks = open_sinks(config, directory)
            stack.callback(sinks.close)
            lanes.append(Lane(lane_trainer, directory, sinks, Checkpointer(directory, sync_metrics=sinks.sync)))
        started = time.perf_counter()
        state = group.init()
        init_s = time.perf_counter() - started
        for index, one in enumerate(lanes):  # before training: a kill at any instant leaves resumable runs
            one.checkpointer.save(one.trainer, lane(state, index), one.progress)
        with StopFlag() as stop_flag:
            stopped_by = GroupLoop(group, lanes, stop_flag, say, compile_s, reused, init_s, note).run(state)
        raise_if_signalled(stopped_by)
        return [one.outcome for one in lanes]


def group_plan(plan: Plan, note: dict[str, Any]) -> Plan:
    """`plan` recording the lane's group in `extra.seed_group` (how `rlfit experiment resume` finds it)."""
    return dataclasses.replace(plan, extra=dataclasses.replace(plan.figures, seed_group=note).to_json())


def recorded_group(path: Path) -> dict[str, Any] | None:
    """The `seed_group` record (seeds, size, reason) of the group a run directory was trained in (its
    plan.json), or None."""
    import json

    try:
        note = PlanExtra.from_json(json.loads(RunDir(path).plan.read_text())["extra"]).seed_group
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return note if isinstance(note, dict) and isinstance(note.get("seeds"), list) else None


def resume_seed_group(paths: Sequence[Path], say: Callable[[str], None],
                      note: dict[str, Any]) -> list[LaneOutcome] | None:
    """Continues lanes of a stopped or killed group (their run directories, `paths`) in one program, from their
    newest checkpoint they all have (a kill between two lanes' saves leaves one lane a checkpoint ahead: it
    goes back to the others' and computes the same again), to the plan's end: bit-identical to the group never
    stopped. None, with nothing written, when they cannot continue together (no common checkpoint, replay left
    out, other sizes): the caller resumes each alone."""
    from rlfit.checkpoints.format import dropped_leaves
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning.plan import make_plan
    from rlfit.planning.device_plan import check_device_precision
    from rlfit.run.restore import checked_config, read_newest_meta, restore_newest, rewind_run_dir
    from rlfit.rundir.layout import lock_run_dir
    from rlfit.study.seed_group import stack

    with contextlib.ExitStack() as stack_of_locks:
        records = []
        for path in paths:
            directory = RunDir(path)
            stack_of_locks.enter_context(lock_run_dir(directory.path, "resume"))
            records.append((directory, read_newest_meta(directory)))
        if any(record is None for _, record in records):
            return None
        common = min(record.iteration for _, record in records)
        restored = []
        for directory, record in records:
            try:
                trainer, state, meta = restore_newest(directory, checked_config(directory, record), at_most=common)
            except UserError:  # nothing at or before the common iteration: this lane resumes alone
                return None
            restored.append((directory, trainer, state, meta))
        iterations = {meta.iteration for _, _, _, meta in restored}
        sizes = {trainer.plan.sizes for _, trainer, _, _ in restored}
        if len(iterations) > 1 or len(sizes) > 1 or any(dropped_leaves(meta) for *_, meta in restored):
            return None
        precision = restored[0][1].plan.precision  # as a solo resume: checked on this device, then set
        check_device_precision(precision)
        configure_jax(precision)
        lanes, states = [], []
        for directory, trainer, state, meta in restored:
            plan = make_plan(trainer.config, trainer.plan.sizes, trainer.plan.reasons, (meta.iteration, meta.env_steps))
            trainer = dataclasses.replace(trainer, plan=plan)
            rewind_run_dir(directory, meta.iteration, trainer.config, group_plan(plan, note).to_dict())
            sinks = open_sinks(trainer.config, directory)
            stack_of_locks.callback(sinks.close)
            checkpointer = Checkpointer(directory, sync_metrics=sinks.sync)
            checkpointer.last_saved = meta.iteration
            lanes.append(Lane(trainer, directory, sinks, checkpointer, Progress.from_record(meta.progress)))
            states.append(state)
        group = SeedGroup.build(lanes[0].trainer, [one.trainer.config.run.seed for one in lanes])
        started = time.perf_counter()
        state = stack(states)
        compile_s = group.compile(state)
        say(f"rlfit: resuming seeds {', '.join(str(s) for s in group.seeds)} in one program from iteration "
            f"{lanes[0].progress.iteration}")
        with StopFlag() as stop_flag:
            init_s = time.perf_counter() - started - compile_s
            stopped_by = GroupLoop(group, lanes, stop_flag, say, compile_s, False, init_s, note).run(state)
        raise_if_signalled(stopped_by)
        return [one.outcome for one in lanes]


@dataclass
class GroupLoop:
    """Steps a compiled seed group to the plan's end, each lane logging, evaluating and saving as a solo run."""

    group: SeedGroup
    lanes: list[Lane]
    stop_flag: Any
    say: Callable[[str], None]
    compile_s: float
    compile_reused: bool
    init_s: float
    note: dict[str, Any]
    started: float = field(default=0.0, init=False)
    """`time.perf_counter()` when the loop started."""
    session_steps: int = field(default=0, init=False)
    """Env steps per lane this session."""
    eval_s: float = field(default=0.0, init=False)
    slowest_step_s: float = field(default=0.0, init=False)
    """The slowest iteration of the session, its lanes' saves included."""

    def run(self, state: Any) -> str | None:
        """Trains every lane to the plan's end or its stop; what stopped the lanes still training (a time budget,
        a signal's name), None when each ended by its own rules or at the plan's end."""
        from rlfit.planning.out_of_memory import is_out_of_memory

        try:
            return self._train(state)
        except Exception as error:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
            if not is_out_of_memory(error):
                raise
            raise GroupOutOfMemory(str(error).splitlines()[0][:300]) from None

    def _train(self, state: Any) -> str | None:
        plan, run = self.group.trainer.plan, self.group.trainer.config.run
        rules = StopRules.from_config(run)  # every lane has the same run section but its seed
        self.started = time.perf_counter()
        iteration = self.lanes[0].progress.iteration
        while iteration < plan.num_iterations and any(one.outcome is None for one in self.lanes):
            step_started = time.perf_counter()
            state, metrics = self.group.step(state)
            metrics = jax.device_get(metrics)  # waits for the iteration to finish
            seconds = time.perf_counter() - step_started
            iteration += 1
            self.session_steps += plan.env_steps_per_iteration
            last = iteration == plan.num_iterations
            results = self._evaluate_if_due(state, iteration, plan.num_iterations, run.eval_every)
            ending = []  # (lane, its state, stopped_by): summaries written together, at one wall clock
            for index, one in enumerate(self.lanes):
                if one.outcome is None:
                    ended = self._lane_iteration(one, index, state, lane(metrics, index), seconds,
                                                 None if results is None else lane(results, index), rules, last)
                    if ended is not None:
                        ending.append((one, lane(state, index), ended))
            wall_s = time.perf_counter() - self.started
            for one, lane_state, stopped_by in ending:
                self._finish(one, lane_state, stopped_by, wall_s)
            self.slowest_step_s = max(self.slowest_step_s, time.perf_counter() - step_started)
            stop = None if last else stop_before_next(rules, time.perf_counter() - self.started, self.slowest_step_s,
                                                      self.stop_flag.signal_name)
            if stop is not None:
                self._stop_every_lane(state, iteration, stop)
                return stop
        return None

    def _evaluate_if_due(self, state: Any, iteration: int, num_iterations: int, eval_every: int) -> Any | None:
        """Every lane's host `EvalMetrics` where this iteration is evaluated, else None."""
        if not evaluation_due(iteration, num_iterations, eval_every):
            return None
        eval_started = time.perf_counter()
        results = jax.device_get(self.group.evaluate(state, iteration))
        self.eval_s += time.perf_counter() - eval_started
        return results

    def _lane_iteration(self, one: Lane, index: int, state: Any, metrics: Any, seconds: float, result: Any,
                        rules: StopRules, last: bool) -> str | None:
        """One lane's share of an iteration: its rows, evaluation, checkpoint and own stopping rules. Returns
        how the lane ends here ('' at the plan's end, else a stopping rule's name), or None when it goes on."""
        plan = one.trainer.plan
        algorithm_row = one.trainer.learner.metrics_row(metrics)
        report = after_step(advanced(one.progress, plan.env_steps_per_iteration), metrics, algorithm_row,
                            Timing(seconds, time.perf_counter() - self.started), plan.env_steps_per_iteration, last)
        one.progress = report.progress
        if report.stop == NON_FINITE:  # recorded; the other lanes go on (the decision: `rlfit.run.after_step`)
            one.outcome = LaneOutcome(one.directory.path, failure=f"training became non-finite at iteration "
                                      f"{one.progress.iteration}: {first_non_finite(algorithm_row)}; this state was "
                                      "not saved")
            return None
        one.sinks.write("train", report.train_row)
        if result is not None:
            report = after_eval(report, result, rules, last)
            one.progress = report.progress
            one.sinks.write("eval", report.eval_row)
        lane_state = lane(state, index)
        one.checkpointer.after_iteration(one.trainer, lane_state, one.progress, final=last)
        if last:
            return ""
        if report.stop is not None:
            one.checkpointer.save(one.trainer, lane_state, one.progress)
        return report.stop

    def _stop_every_lane(self, state: Any, iteration: int, stop: str) -> None:
        """Ends every lane still training with a checkpoint and its summary (a time budget, a signal)."""
        self.say(f"rlfit: stopped by {stop} at iteration {iteration}")
        stopping = [(index, one) for index, one in enumerate(self.lanes) if one.outcome is None]
        for index, one in stopping:
            one.checkpointer.save(one.trainer, lane(state, index), one.progress)
        wall_s = time.perf_counter() - self.started
        for index, one in stopping:
            self._finish(one, lane(state, index), stop, wall_s)

    def _finish(self, one: Lane, lane_state: Any, stopped_by: str | None, wall_s: float) -> None:
        """Writes the lane's summary.json: a solo run's fields (its own steps per second over the group's wall
        clock `wall_s`) and `seed_group` (with the env steps per second of all lanes together)."""
        stopped_by = stopped_by or None  # '' (the plan's end) is written as a solo run writes it
        record = run_summary(one.trainer, lane_state, one.progress, compile_s=self.compile_s,
                             compile_reused=self.compile_reused, init_s=self.init_s,
                             train_wall_s=wall_s, session_steps=one.progress.env_steps - one.session_start_steps,
                             eval_s=self.eval_s, stopped_by=stopped_by)
        group_sps_mean = self.session_steps * len(self.lanes) / wall_s if wall_s > 0 else None
        summary = extended(record, LaneSummary, seed_group={**self.note, "group_sps_mean": group_sps_mean}).to_json()
        write_json(one.directory.summary, summary)
        one.sinks.sync()
        one.outcome = LaneOutcome(one.directory.path, summary=summary)
