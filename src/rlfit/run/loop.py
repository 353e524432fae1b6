"""The host loop, one for a single run and a seed group alike: each pass one compiled iteration of every lane, then
per lane log, (evaluate), save, stop? A single run is one lane (`rlfit.run.stepper.OneSeed`); a seed group several
in one vmapped program (`rlfit.run.seed_group.SeedGroup`), each lane its own run directory
(`rlfit.run.lanes.Lane`).

    run:      starting state (backing off while it does not fit) -> save iteration 0 -> train -> a RunResult a lane
    train:    compile -> iterate; out of device memory: recover (`rlfit.run.recover`) and train again
    iterate:  step -> per lane: after_step -> log -> (evaluate -> after_eval -> log) -> save -> the lane's own stop
              -> stop_before_next -> agreed (every lane still training stops)

Everything inside an iteration is one compiled call; this loop only moves a few scalars to the host. What to log
and when to stop are pure functions of those scalars (`rlfit.run.after_step`). Around the loop, with their own
state: the out-of-memory back-off (`rlfit.run.recover`), the stop grace's watcher (`rlfit.run.stop_grace`) and the
agreement between processes (`rlfit.run.loop_state.agreed`), for one lane and for several; the loop's own counters
are typed records (`rlfit.run.loop_state`). A lane ends one way: its RunResult's `stopped_by` says why (None at the
plan's end, a stopping rule's name, or a signal's: the caller turns a signal into its exit code,
`rlfit.run.signals.raise_if_signalled`). Errors are raised: non-finite training of a single run (`NonFiniteError`; a
lane of a group records it as its `failure`, the others go on), out of memory with no smaller sizes (`OutOfMemory`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax

from rlfit.algos.contract import StepMetrics, TrainState
from rlfit.exit_codes import NON_FINITE
from rlfit.hardware.compile_log import time_to_first_step
from rlfit.parallel.distributed import is_writer, process_count
from rlfit.rundir.layout import RunDir, write_json
from rlfit.run.after_step import (NON_FINITE as NON_FINITE_STOP, StepReport, Timing, advanced, after_eval, after_step,
                                  evaluation_due, first_non_finite, stop_before_next)
from rlfit.run.loop_state import LanesAt, LoopRecord, SessionTimes, agreed, grace_lock, lanes_at, still_training
from rlfit.run.progress import Event, Progress
from rlfit.run.recover import BackOff, Start, agree_to_back_off, recover, smaller
from rlfit.run.signals import SIGNAL_NAMES
from rlfit.run.stepper import Stepper, same_abstract
from rlfit.run.stop_grace import GraceWatch
from rlfit.run.stopping import StopRules
from rlfit.run.summary import config_total_steps, run_summary
from rlfit.run.summary_record import LaneSummary, RunSummary, SessionSummary, extended
from rlfit.run.trainer import Compiled, Trainer

if TYPE_CHECKING:
    from rlfit.hardware.utilization import UtilizationSampler
    from rlfit.run.lanes import Lane
    from rlfit.run.signals import StopFlag
    from rlfit.sinks.console import ConsoleSink

__all__ = ["EXIT_NON_FINITE", "NonFiniteError", "RunResult", "Runner", "lane_plan"]

EXIT_NON_FINITE = NON_FINITE


class NonFiniteError(Exception):
    """Training produced NaN or infinity; the state was not saved."""

    exit_code = EXIT_NON_FINITE


@dataclass
class RunResult:
    """How a lane ended: its final state, its counters, the summary written to disk and why it ended."""

    state: TrainState | None
    """None for a group's lane that failed."""
    progress: Progress
    record: SessionSummary | LaneSummary | None
    """summary.json as its typed record (`rlfit.run.summary_record`); None for a group's lane that failed (nothing
    written)."""
    run_dir: RunDir
    stopped_by: str | None = None
    """None at the plan's end; else a stopping rule's name or a signal's ('SIGTERM', 'SIGINT'), as summary.json."""
    failure: str | None = None
    """A lane of a group that became non-finite: what a single run would have raised (no summary, no state)."""

    @property
    def summary(self) -> dict[str, Any]:
        """summary.json as written: the record's JSON object ({} for a failed lane)."""
        return self.record.to_json() if self.record is not None else {}


Reports = list[tuple[int, "Lane", StepReport]]
"""Per lane still training this iteration: its index, the lane, what `after_step` (and `after_eval`) decided."""


def lane_plan(plan: Any, note: dict[str, Any] | None) -> Any:
    """`plan` recording a lane's seed group in `extra.seed_group` (how `rlfit experiment resume` finds it)."""
    if note is None:
        return plan
    return dataclasses.replace(plan, extra=dataclasses.replace(plan.figures, seed_group=note).to_json())


class Runner:
    """Trains its lanes through a Stepper's programs to the plan's end or their stops. One Runner runs one session."""

    def __init__(self, stepper: Stepper[TrainState], lanes: list[Lane], stop_flag: StopFlag | None = None,
                 say: Callable[[str], None] | None = None, console: ConsoleSink | None = None,
                 sampler: UtilizationSampler | None = None):
        self.stepper = stepper
        """Rebuilt at smaller sizes by an out-of-memory back-off."""
        self.lanes = lanes
        self.stop_flag = stop_flag
        self.say_to = say
        self.console = console
        self.sampler = sampler
        """A started `UtilizationSampler` (GPU utilization and memory into each train row), or None."""
        self._events: list[dict[str, Any]] = []
        """The run's events (back-offs), earlier sessions' included."""
        self._times = SessionTimes(time.perf_counter())
        self._pending: tuple[Stepper[TrainState], Compiled[TrainState] | Exception] | None = None
        """The stepper and the programs `run` started compiling for it (or the error starting them raised)."""
        self._grace: GraceWatch[LanesAt] | None = None
        self._loop: LoopRecord | None = None
        """The loop's counters at the last finished iteration, for the summary the watcher writes."""

    @property
    def trainer(self) -> Trainer[TrainState]:
        return self.stepper.trainer

    def run(self, state: TrainState | None = None) -> list[RunResult]:
        """Trains from `state` (every lane's; fresh when None) from each lane's counters; a RunResult a lane.

        On RESOURCE_EXHAUSTED (compiling or stepping) it backs off to the next smaller valid sizes, recompiles
        and continues from the newest checkpoints or this session's starting state, recording the event.
        """
        from rlfit.planning.out_of_memory import is_out_of_memory

        self._events = list(self.lanes[0].progress.events)
        self._times = SessionTimes(time.perf_counter())
        fresh = state is None
        # The training step and the evaluation compile in the background while the starting state is built (and
        # saved); a compile that fails is raised where the program is needed, in `_train`.
        self._pending = self._start_compiling(total=3 if fresh else 2)
        state = self._fresh_state() if state is None else state
        # init_s includes compiling the starting state's program
        self._times = self._times._replace(init_s=time.perf_counter() - self._times.started)
        start = self._save_start(state)
        save_first = False
        while True:
            try:
                return self._train(state, save_first)
            except Exception as error:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
                if not is_out_of_memory(error):
                    raise
                message = str(error)
            # Outside the handler: the exception, its traceback and the failed iteration's buffers they hold are
            # released before anything is reloaded.
            state = None
            recovery = recover(message, self.stepper, [(lane.trainer, lane.directory) for lane in self.lanes], start,
                               self._events)
            self._adopt(recovery.stepper, recovery.backed, recovery.progress)
            state, save_first = recovery.state, True  # the environments changed size

    def _save_start(self, state: TrainState) -> Start:
        """Saves each lane's starting state where it has no checkpoint (before compiling: a kill at any instant
        leaves a resumable run); what an out-of-memory back-off continues from: the newest checkpoints, which hold
        this session's start or later; a host copy of the starting state only when nothing could be saved (a replay
        buffer can be most of the host's memory). Over several processes always the checkpoint."""
        for index, lane in enumerate(self.lanes):
            if lane.checkpointer.latest_step() is None:
                self._timed_save(lane.checkpointer.save, lane.trainer, self.stepper.lane(state, index), lane.progress)
        saved = all(lane.checkpointer.latest_step() is not None for lane in self.lanes)
        return Start(jax.device_get(state) if process_count() == 1 and not saved else None,
                     [lane.progress.copy() for lane in self.lanes])

    def _train(self, state: TrainState, save_first: bool) -> list[RunResult]:
        plan = self.trainer.plan
        state = self.stepper.place(state)  # restored or resized states arrive on one device
        compiled = self._compiled_for(state)
        training = still_training(self.lanes)
        if save_first:  # the environments changed size (after a back-off): save the state they start from
            for index, lane in training:
                lane.checkpointer.save(lane.trainer, self.stepper.lane(state, index), lane.progress, force=True)
        waited = self._wait_for(compiled.step)  # raises the compile's error, if any
        done = "reused this process's compiled programs" if compiled.reused else \
            f"training step ready (waited {waited:.1f}s for its compile)"
        self._say(f"{done} on {plan.device}; {plan.num_iterations - training[0][1].progress.iteration} iterations of "
                  f"{plan.env_steps_per_iteration:,} steps")
        rules = StopRules.from_config(self.trainer.config.run)
        self._loop = loop = LoopRecord(compiled, time.perf_counter())
        watch = self._grace_watch(rules)
        try:
            return self._iterate(state, rules, watch, loop)
        finally:
            if watch is not None:
                watch.stop()

    def _iterate(self, state: TrainState, rules: StopRules, watch: GraceWatch[LanesAt] | None, loop: LoopRecord
                 ) -> list[RunResult]:
        """Act, step and update (one compiled call), then per lane log, evaluate, save and decide, once per
        iteration, from the loop's counters `loop`; then whether every lane still training stops."""
        plan = self.trainer.plan
        while (going := still_training(self.lanes)) and going[0][1].progress.iteration < plan.num_iterations:
            step_started = self._iteration_started(watch)
            state, metrics, seconds = self._step(loop.compiled, state)
            timing, sampled = Timing(seconds, time.perf_counter() - loop.started), self._sampled()
            last = going[0][1].progress.iteration + 1 == plan.num_iterations
            reports = self._after_step(going, metrics, timing, sampled, last)
            reports, eval_s = self._evaluate_if_due(loop.compiled, state, reports, rules, last)
            loop = loop.after(plan.env_steps_per_iteration, eval_s, time.perf_counter() - step_started)
            self._save_due(state, reports, loop, last, watch)
            self._end_lanes(state, reports, loop, last, watch)
            if last or not still_training(self.lanes):
                break
            self._iteration_ended(state, watch)
            stop = agreed(stop_before_next(
                rules, time.perf_counter() - self._times.started, loop.slowest_step_s + self._times.slowest_save_s,
                self.stop_flag.signal_name if self.stop_flag is not None else None))
            if stop is not None:
                self._stop(state, stop, watch, loop)
        # Lanes at the plan's end already (a resumed run whose summary was not written):
        for index, lane in still_training(self.lanes):
            self._end(lane, self.stepper.lane(state, index), None, loop)
        return [lane.result for lane in self.lanes if lane.result is not None]

    # The loop's steps, in the order it takes them.

    def _iteration_started(self, watch: GraceWatch[LanesAt] | None) -> float:
        started = time.perf_counter()
        if watch is not None:
            watch.iteration_started()
        return started

    def _step(self, compiled: Compiled[TrainState], state: TrainState) -> tuple[Any, Any, float]:
        """One compiled iteration of every lane (collect, returns, update); its host metrics and seconds."""
        started = time.perf_counter()
        state, metrics = compiled.iteration(state)
        metrics = jax.device_get(metrics)  # waits for the iteration to finish
        seconds = time.perf_counter() - started
        if self._times.time_to_first_step_s is None:
            self._times = self._times._replace(time_to_first_step_s=time_to_first_step(self._times.started))
        return state, metrics, seconds

    def _sampled(self) -> dict[str, Any]:
        """The utilization sampler's fields for this iteration's train rows (none without a sampler)."""
        return self.sampler.take() if self.sampler is not None else {}

    def _after_step(self, going: list[tuple[int, Lane]], metrics: StepMetrics, timing: Timing, sampled: dict[str, Any],
                    last: bool) -> Reports:
        """Each lane's train row (written); a lane that became non-finite fails (`_failed`)."""
        steps = self.trainer.plan.env_steps_per_iteration
        reports: Reports = []
        for index, lane in going:
            lane_metrics = self.stepper.lane(metrics, index)
            report = after_step(advanced(lane.progress, steps), lane_metrics,
                                lane.trainer.learner.metrics_row(lane_metrics), timing, steps, last)
            if report.stop == NON_FINITE_STOP:
                self._failed(lane, report, lane_metrics)
                continue
            assert report.train_row is not None, "a finite iteration has its train row"
            lane.sinks.write("train", {**report.train_row, **sampled})
            reports.append((index, lane, report))
        return reports

    def _evaluate_if_due(self, compiled: Compiled[TrainState], state: TrainState, reports: Reports, rules: StopRules,
                         last: bool
                         ) -> tuple[Reports, float]:
        """`reports` after this iteration's evaluation where one is due (its rows written), and its seconds; each
        lane's counters updated."""
        run = self.trainer.config.run
        if reports and evaluation_due(reports[0][2].progress.iteration, self.trainer.plan.num_iterations,
                                      run.eval_every):
            started = time.perf_counter()
            self._wait_for(compiled.evaluation)
            results = jax.device_get(self.stepper.evaluate_lanes(compiled, state, reports[0][2].progress.iteration))
            reports = [(index, lane, after_eval(report, self.stepper.lane(results, index), rules, last))
                       for index, lane, report in reports]
            for _, lane, report in reports:
                assert report.eval_row is not None, "an evaluated iteration has its eval row"
                lane.sinks.write("eval", report.eval_row)
            eval_s = time.perf_counter() - started
        else:
            eval_s = 0.0
        for _, lane, report in reports:
            lane.progress = report.progress
        return reports, eval_s

    def _save_due(self, state: TrainState, reports: Reports, loop: LoopRecord, last: bool,
                  watch: GraceWatch[LanesAt] | None
                  ) -> None:
        """The checkpoints `run.save_interval` asks for (or the last)."""
        with grace_lock(watch):
            for index, lane, _ in reports:
                self._timed_save(lane.checkpointer.after_iteration, lane.trainer, self.stepper.lane(state, index),
                                 lane.progress, final=last)
        self._loop = loop

    def _end_lanes(self, state: TrainState, reports: Reports, loop: LoopRecord, last: bool,
                   watch: GraceWatch[LanesAt] | None
                   ) -> None:
        """Ends the lanes at the plan's end (saved already) and those a stopping rule stops (saved here, unless
        saved), each with its summary."""
        ending = [(index, lane, None if last else report.stop) for index, lane, report in reports
                  if last or report.stop is not None]
        if not last and ending:
            with grace_lock(watch):
                if watch is not None and len(ending) == len(still_training(self.lanes)):
                    watch.handled()
                for index, lane, _ in ending:
                    lane.checkpointer.save(lane.trainer, self.stepper.lane(state, index), lane.progress)
        for index, lane, stopped_by in ending:
            if stopped_by is not None:
                self._say(f"rlfit: stopped by {stopped_by} at iteration {lane.progress.iteration}")
            self._end(lane, self.stepper.lane(state, index), stopped_by, loop)

    def _iteration_ended(self, state: TrainState, watch: GraceWatch[LanesAt] | None) -> None:
        """The watcher's note of the finished iteration (a host copy where iterations outlast the grace)."""
        if watch is None:
            return
        at = lanes_at(self.lanes)
        watch.slowest_save_s = self._times.slowest_save_s
        watch.iteration_ended(state, at, saved=all(self.lanes[index].checkpointer.last_saved == at.iteration
                                                   for index, _ in at.lanes))

    def _stop(self, state: TrainState, stop: str, watch: GraceWatch[LanesAt] | None, loop: LoopRecord) -> None:
        """Ends every lane still training before the plan's end: a checkpoint of this iteration (unless saved), then
        its summary."""
        going = still_training(self.lanes)
        with grace_lock(watch):
            if watch is not None:
                watch.handled()
            for index, lane in going:
                lane.checkpointer.save(lane.trainer, self.stepper.lane(state, index), lane.progress)
        if stop not in SIGNAL_NAMES:  # a signal's stop is said by the caller, with its exit code
            self._say(f"rlfit: stopped by {stop} at iteration {going[0][1].progress.iteration}")
        for index, lane in going:
            self._end(lane, self.stepper.lane(state, index), stop, loop)

    def _end(self, lane: Lane, state: TrainState, stopped_by: str | None, loop: LoopRecord) -> None:
        summary = self._write_summary(lane, state, lane.progress, loop, stopped_by)
        lane.sinks.sync()
        lane.result = RunResult(state, lane.progress, summary, lane.directory, stopped_by)

    def _failed(self, lane: Lane, report: StepReport, metrics: StepMetrics) -> None:
        """A lane that became non-finite: a single run raises NonFiniteError; a group's lane records it as its
        failure and the others go on (the decision: `rlfit.run.after_step`). Its state is not saved."""
        message = non_finite_message(lane, report.progress.iteration, metrics)
        if len(self.lanes) == 1:
            raise NonFiniteError(message)
        lane.progress = report.progress
        lane.result = RunResult(None, lane.progress, None, lane.directory, None, failure=message)

    # Around the loop: compiling, the starting state, back-off, the stop grace, the summary.

    def _start_compiling(self, total: int) -> tuple[Stepper[TrainState], Compiled[TrainState] | Exception]:
        """Starts the programs' compiles in the background (`Trainer.compile`); the stepper they are for, and them
        or the error that starting them raised (raised again in `_train`, where a back-off handles it)."""
        try:
            return self.stepper, self.stepper.programs(None, self._say, total)
        except Exception as error:  # noqa: BLE001 - raised again by `_compiled_for`
            return self.stepper, error

    def _compiled_for(self, state: TrainState) -> Compiled[TrainState]:
        """The programs started by `run` when they are for this stepper and `state`'s shapes, else new ones (after a
        back-off, the trainer's sizes changed)."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] is self.stepper:
            programs = pending[1]
            if isinstance(programs, Exception):
                raise programs
            if same_abstract(programs.abstract, self.stepper.abstract_of(state)):
                return programs
        return self.stepper.programs(state, self._say, 2)

    def _fresh_state(self) -> TrainState:
        """The lanes' starting state, backing off to smaller sizes while creating it runs out of memory (a large
        replay buffer is allocated here)."""
        from rlfit.planning.out_of_memory import is_out_of_memory

        while True:
            try:
                state, program = self.stepper.starting_state(self._say, 3)
                self._times = self._times._replace(starting_program=program)
                return state
            except Exception as error:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
                if not is_out_of_memory(error):
                    raise
                agree_to_back_off(self.trainer, len(self._events))
                backed = smaller(self.trainer, str(error), self.lanes[0].progress, "init")
                self._adopt(self.stepper.rebuilt(backed.trainer), backed, [lane.progress for lane in self.lanes])

    def _adopt(self, stepper: Stepper[TrainState], backed: BackOff, progresses: list[Progress]) -> None:
        """Trains on with a back-off's stepper, recording it in every lane still training: the event (in its
        progress, metrics.jsonl rewound to its iteration), plan.json; and the console's totals."""
        self.stepper = stepper
        self._events.append(backed.event)
        for lane, progress in zip(self.lanes, progresses, strict=True):
            adopt_back_off(lane, backed, progress, self._events)
        self._say(f"rlfit: {backed.reason}")
        if self.console is not None:
            self.console.retarget(backed.plan.num_iterations, config_total_steps(backed.trainer.config, backed.plan))

    def _grace_watch(self, rules: StopRules) -> GraceWatch[LanesAt] | None:
        """The watcher that keeps `run.stop_grace_s` (`rlfit.run.stop_grace`), started; None where there is no
        grace or several processes (said in one line: a checkpoint needs every process)."""
        grace_s = self.trainer.config.run.stop_grace_s
        if not grace_s or self.stop_flag is None:
            return None
        if process_count() > 1:
            self._say(f"rlfit: run.stop_grace_s={grace_s:g} is not kept over several processes (a checkpoint needs "
                      "every process): a stop saves at the end of the running iteration")
            return None
        watch = GraceWatch(grace_s, rules.time_budget_s, self._save_within_grace, self._say,
                           saved_iteration=still_training(self.lanes)[0][1].checkpointer.latest_step(),
                           start=lanes_at(self.lanes))
        self._grace = watch
        watch.start()
        return watch

    def _save_within_grace(self, host_state: Any | None, at: LanesAt, reason: str) -> None:
        """The watcher's save (its thread, JAX's CPU device): each lane's last finished iteration's checkpoint, when
        it has a host copy newer than the newest checkpoint (`host_state`; None: nothing newer), and its summary."""
        assert self._loop is not None, "the watcher runs in a started loop"
        for index, progress in at.lanes:
            lane = self.lanes[index]
            state = self.stepper.lane(host_state, index) if host_state is not None else None
            if state is not None:
                lane.checkpointer.save(lane.trainer, state, progress, force=True)
            self._write_summary(lane, state, progress, self._loop, reason)

    def _write_summary(self, lane: Lane, state: TrainState | None, progress: Progress, loop: LoopRecord,
                       stopped_by: str | None) -> SessionSummary | LaneSummary:
        """Writes the lane's summary.json for the session so far (at the end, or when the lane stops)."""
        programs, times = self._times.programs(loop.compiled), self._times
        train_wall_s = time.perf_counter() - loop.started
        summary = run_summary(lane.trainer, state, progress, compile_s=sum(program.compile_s for program in programs),
                              compile_reused=loop.compiled.reused, init_s=times.init_s, train_wall_s=train_wall_s,
                              session_steps=loop.session_steps, eval_s=loop.eval_s,
                              compile_wait_s=times.compile_wait_s, stopped_by=stopped_by, programs=programs,
                              time_to_first_step_s=times.time_to_first_step_s)
        grace = self._grace.record() if self._grace is not None else None
        record = summary_record(summary, lane.note, grace, loop.session_steps * len(self.lanes), train_wall_s)
        if is_writer():
            write_json(lane.directory.summary, record.to_json())
        return record

    def _timed_save(self, save: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        """Runs a checkpoint call, keeping the slowest seen (what a time budget must leave room for)."""
        save_started = time.perf_counter()
        save(*args, **kwargs)
        self._times = self._times.after_save(time.perf_counter() - save_started)

    def _wait_for(self, program: Any) -> float:
        """Waits for a program's compile (a future); the seconds waited, also added to `compile_wait_s`."""
        started = time.perf_counter()
        program.result()
        waited = time.perf_counter() - started
        self._times = self._times.after_wait(waited)
        return waited

    def _say(self, text: str) -> None:
        if self.say_to is not None:
            self.say_to(text)


def non_finite_message(lane: Lane, iteration: int, metrics: StepMetrics) -> str:
    """What a lane that became non-finite at `iteration` (its host `metrics`) says: the first non-finite value, the
    last good checkpoint, and the algorithm's hint."""
    from rlfit.algos.registry import algorithm

    where = "no checkpoint was written yet"
    if lane.checkpointer.latest_step() is not None:
        where = f"last good checkpoint: iteration {lane.checkpointer.latest_step()} in {lane.directory.checkpoints}"
    row = lane.trainer.learner.metrics_row(metrics)
    return (f"training became non-finite at iteration {iteration}: {first_non_finite(row)}; this state was not saved "
            f"({where}); {algorithm(lane.trainer.config.algo).non_finite_hint}")


def adopt_back_off(lane: Lane, backed: BackOff, progress: Progress, events: list[Event]) -> None:
    """Moves `lane` to a back-off's sizes (its trainer with its own config) and counters `progress` carrying the run's
    `events`; a lane still training also records it: metrics.jsonl rewound to its iteration, the event, plan.json."""
    config = lane.trainer.config
    lane.trainer = backed.trainer if config == backed.trainer.config else dataclasses.replace(backed.trainer,
                                                                                              config=config)
    progress.events = list(events)
    lane.progress = progress
    if lane.result is None:
        lane.sinks.rewind(progress.iteration)
        lane.sinks.write("event", backed.event)
        if is_writer():
            write_json(lane.directory.plan, lane_plan(backed.plan, lane.note).to_dict())


def summary_record(summary: RunSummary, note: dict[str, Any] | None, grace: dict[str, float | bool] | None,
                   group_steps: int, train_wall_s: float) -> SessionSummary | LaneSummary:
    """summary.json's record of a lane: a single run's (`note` None) with the stop grace's record `grace`; a seed
    group's lane with its group `note` and the env steps per second of all its lanes together (`group_steps` in
    `train_wall_s`)."""
    if note is None:
        return extended(summary, SessionSummary, stop_grace=grace)
    group_sps = group_steps / train_wall_s if train_wall_s > 0 else None
    return extended(summary, LaneSummary, seed_group={**note, "group_sps_mean": group_sps})
