"""The host loop of a single run: each pass one compiled iteration, then log, (evaluate), save, stop?

    run:      starting state (backing off while it does not fit) -> save iteration 0 -> train -> RunResult
    train:    compile -> iterate; out of device memory: recover (`rlfit.run.recover`) and train again
    iterate:  step -> after_step -> log -> (evaluate -> after_eval -> log) -> save -> stop_before_next -> agreed

Everything inside an iteration is one compiled call; this loop only moves a few scalars to the host. What to log
and when to stop are pure functions of those scalars (`rlfit.run.after_step`), shared with the seed-group loop. The
run ends one way: `run` returns a RunResult whose `stopped_by` says why (None at the plan's end, a stopping rule's
name, or a signal's: the caller turns a signal into its exit code, `rlfit.run.signals.raise_if_signalled`). Errors
are raised: non-finite training (`NonFiniteError`), out of memory with no smaller sizes (`OutOfMemory`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import jax

from rlfit.exit_codes import NON_FINITE
from rlfit.hardware.compile_log import ProgramCompile, time_to_first_step
from rlfit.parallel.distributed import any_process, is_writer, process_count
from rlfit.rundir.layout import RunDir, write_json
from rlfit.sinks import Sinks
from rlfit.run.after_step import (NON_FINITE as NON_FINITE_STOP, OTHER_PROCESS, Progress, StepReport, Timing,
                                  advanced, after_eval, after_step, evaluation_due, first_non_finite, stop_before_next)
from rlfit.run.build import Compiled, Trainer
from rlfit.run.recover import BackOff, agree_to_back_off, recover, smaller
from rlfit.run.signals import SIGNAL_NAMES
from rlfit.run.stop_grace import GraceWatch
from rlfit.run.stopping import StopRules
from rlfit.run.summary import config_total_steps, run_summary
from rlfit.run.summary_record import SessionSummary, extended

if TYPE_CHECKING:
    from rlfit.checkpoints.schedule import Checkpointer
    from rlfit.hardware.utilization import UtilizationSampler
    from rlfit.run.signals import StopFlag
    from rlfit.sinks.console import ConsoleSink

__all__ = ["EXIT_NON_FINITE", "NonFiniteError", "Progress", "RunResult", "Runner", "eval_key", "same_abstract"]

EXIT_NON_FINITE = NON_FINITE


class NonFiniteError(Exception):
    """Training produced NaN or infinity; the state was not saved."""

    exit_code = EXIT_NON_FINITE


@dataclass
class RunResult:
    """What `run` returns: the final state, its counters, the summary written to disk and why the run ended."""

    state: Any
    progress: Progress
    summary: dict[str, Any]
    run_dir: RunDir
    stopped_by: str | None = None
    """None at the plan's end; else a stopping rule's name or a signal's ('SIGTERM', 'SIGINT'), as summary.json."""


class LoopRecord(NamedTuple):
    """The loop's own counters at the last finished iteration (what summary.json reports about the session)."""

    compiled: Compiled
    started: float
    """`time.perf_counter()` when the loop started."""
    session_steps: int = 0
    eval_s: float = 0.0
    slowest_step_s: float = 0.0
    """The slowest iteration with its evaluation (its save apart) of this loop."""

    def after(self, env_steps: int, eval_s: float, step_s: float) -> LoopRecord:
        return self._replace(session_steps=self.session_steps + env_steps, eval_s=self.eval_s + eval_s,
                             slowest_step_s=max(self.slowest_step_s, step_s))


def eval_key(seed: int, iteration: int) -> jax.Array:
    """The evaluation key for an iteration: a pure function of seed and iteration, so resume repeats it."""
    return jax.random.fold_in(jax.random.PRNGKey(seed ^ 0x5EED), iteration)


def same_abstract(one: Any, other: Any) -> bool:
    """Whether two abstract states (`Trainer.abstract_of`) have the same structure, shapes, dtypes and shardings."""
    if jax.tree.structure(one) != jax.tree.structure(other):  # type: ignore[operator]  # jaxlib has no stubs for PyTreeDef
        return False
    return all((a.shape, a.dtype, a.sharding) == (b.shape, b.dtype, b.sharding)
               for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(other), strict=True))


class Runner:
    """Runs a Trainer's plan to the end, writing into a run directory. One Runner runs one session (`run` once)."""

    def __init__(self, trainer: Trainer, run_dir: RunDir, sinks: Sinks, checkpointer: Checkpointer | None = None,
                 stop_flag: StopFlag | None = None, console: ConsoleSink | None = None,
                 sampler: UtilizationSampler | None = None):
        self.trainer = trainer
        """Rebuilt at smaller sizes by an out-of-memory back-off."""
        self.run_dir = run_dir
        self.sinks = sinks
        self.checkpointer = checkpointer
        self.stop_flag = stop_flag
        self.console = console
        self.sampler = sampler
        """A started `UtilizationSampler` (GPU utilization and memory into each train row), or None."""
        self._events: list[dict[str, Any]] = []
        """The run's events (back-offs), earlier sessions' included."""
        self._session_started = time.perf_counter()
        """When `run` started (the time budget counts from here)."""
        self._init_s = 0.0
        """Seconds to build the starting state (its program's compile included)."""
        self._slowest_save_s = 0.0
        """The slowest checkpoint save of the session (what a time budget must leave room for)."""
        self._compile_wait_s = 0.0
        """Seconds the session waited for programs compiling in the background."""
        self._starting_program: ProgramCompile | None = None
        """The starting state's program, when this session compiled it."""
        self._pending: tuple[Trainer, Compiled | Exception] | None = None
        """The trainer and the programs `run` started compiling for it in the background (or the error starting them
        raised); taken (None again) by `_compiled_for`."""
        self._time_to_first_step_s: float | None = None
        """Seconds to the end of the session's first training step, set once by that step."""
        self._grace: GraceWatch | None = None
        """The watcher keeping `run.stop_grace_s` while the loop runs (`rlfit.run.stop_grace`), or None."""
        self._loop: LoopRecord | None = None
        """The loop's counters at the last finished iteration, for the summary the watcher writes; None until `_train`
        starts the loop."""

    def run(self, state: Any | None = None, progress: Progress | None = None) -> RunResult:
        """Trains from `state`/`progress` (fresh when None) to the plan's last iteration or a stop.

        On RESOURCE_EXHAUSTED (compiling or stepping) it backs off to the next smaller valid sizes, recompiles
        and continues from the newest checkpoint or this session's starting state, recording the event.
        """
        from rlfit.planning.out_of_memory import is_out_of_memory

        progress = progress or Progress()
        self._events = list(progress.events)
        self._session_started = started = time.perf_counter()
        fresh = state is None
        # The training step and the evaluation compile in the background while the starting state is built (and
        # saved); a compile that fails is raised where the program is needed, in `_train`.
        self._pending = self._start_compiling(total=3 if fresh else 2)
        state = self._fresh_state(progress) if fresh else state
        self._init_s = time.perf_counter() - started  # includes compiling the starting state's program
        checkpointer = self.checkpointer
        if checkpointer is not None and checkpointer.latest_step() is None:
            self._timed_save(lambda: checkpointer.save(self.trainer, state, progress))  # before compiling: a kill
            # at any instant leaves a resumable run
        # What an out-of-memory back-off continues from: the newest checkpoint, which holds this session's start
        # or later; a host copy of the starting state only when nothing could be saved (a replay buffer can be
        # most of the host's memory). Over several processes always the checkpoint, which every process reads.
        saved = self.checkpointer is not None and self.checkpointer.latest_step() is not None
        start = (jax.device_get(state) if process_count() == 1 and not saved else None, progress.copy())
        save_first = False
        while True:
            try:
                return self._train(state, progress, save_first)
            except Exception as error:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
                if not is_out_of_memory(error):
                    raise
                message = str(error)
            # Outside the handler: the exception, its traceback and the failed iteration's buffers they hold are
            # released before anything is reloaded.
            state = None
            recovery = recover(message, self.trainer, self.run_dir, start, self._events)
            self._adopt(recovery.backed, recovery.progress)
            state, progress = recovery.state, recovery.progress
            save_first = self.checkpointer is not None  # the environments changed size

    def _train(self, state: Any, progress: Progress, save_first: bool) -> RunResult:
        plan = self.trainer.plan
        state = self.trainer.place(state)  # restored or resized states arrive on one device
        compiled = self._compiled_for(state)
        if save_first and self.checkpointer is not None:  # the environments changed size (after a back-off): save
            self.checkpointer.save(self.trainer, state, progress, force=True)  # the state they start from
        waited = self._wait_for(compiled.step)  # raises the compile's error, if any
        done = "reused this process's compiled programs" if compiled.reused else \
            f"training step ready (waited {waited:.1f}s for its compile)"
        self._say(f"{done} on {plan.device}; "
                  f"{plan.num_iterations - progress.iteration} iterations of {plan.env_steps_per_iteration:,} steps")
        rules = StopRules.from_config(self.trainer.config.run)
        self._loop = loop = LoopRecord(compiled, time.perf_counter())
        watch = self._grace_watch(rules, progress)
        try:
            return self._iterate(state, progress, rules, watch, loop)
        finally:
            if watch is not None:
                watch.stop()

    def _iterate(self, state: Any, progress: Progress, rules: StopRules, watch: GraceWatch | None, loop: LoopRecord
                 ) -> RunResult:
        """Act, step and update (one compiled call), then log, evaluate, save and decide, once per iteration, from
        the loop's counters `loop`."""
        plan = self.trainer.plan
        while progress.iteration < plan.num_iterations:
            step_started = self._iteration_started(watch)
            state, metrics, seconds = self._step(loop.compiled, state)
            timing, sampled = Timing(seconds, time.perf_counter() - loop.started), self._sampled()
            progress = advanced(progress, plan.env_steps_per_iteration)
            last = progress.iteration == plan.num_iterations
            report = after_step(progress, metrics, self.trainer.learner.metrics_row(metrics), timing,
                                plan.env_steps_per_iteration, last)
            if report.stop == NON_FINITE_STOP:
                raise NonFiniteError(self._non_finite_message(report, metrics))
            assert report.train_row is not None, "a finite iteration has its train row"
            self.sinks.write("train", {**report.train_row, **sampled})
            report, eval_s = self._evaluate_if_due(loop.compiled, state, report, rules, last)
            progress = report.progress
            loop = loop.after(plan.env_steps_per_iteration, eval_s, time.perf_counter() - step_started)
            self._save_due(state, progress, loop, last, watch)
            if last:
                break
            stop = self._agreed(report.stop or stop_before_next(
                rules, time.perf_counter() - self._session_started, loop.slowest_step_s + self._slowest_save_s,
                self.stop_flag.signal_name if self.stop_flag is not None else None))
            if stop is not None:
                return self._stop(state, progress, stop, watch, loop)
        return self._end(state, progress, None, loop)

    # The loop's steps, in the order it takes them.

    def _iteration_started(self, watch: GraceWatch | None) -> float:
        started = time.perf_counter()
        if watch is not None:
            watch.iteration_started()
        return started

    def _step(self, compiled: Compiled, state: Any) -> tuple[Any, Any, float]:
        """One compiled iteration (collect, returns, update); its host metrics and seconds."""
        started = time.perf_counter()
        state, metrics = compiled.iteration(state)
        metrics = jax.device_get(metrics)  # waits for the iteration to finish
        seconds = time.perf_counter() - started
        if self._time_to_first_step_s is None:
            self._time_to_first_step_s = time_to_first_step(self._session_started)
        return state, metrics, seconds

    def _sampled(self) -> dict[str, Any]:
        """The utilization sampler's fields for this iteration's train row (none without a sampler)."""
        return self.sampler.take() if self.sampler is not None else {}

    def _evaluate_if_due(self, compiled: Compiled, state: Any, report: StepReport, rules: StopRules, last: bool
                         ) -> tuple[StepReport, float]:
        """`report` after this iteration's evaluation where one is due (its row written), and its seconds."""
        config, iteration = self.trainer.config, report.progress.iteration
        if not evaluation_due(iteration, self.trainer.plan.num_iterations, config.run.eval_every):
            return report, 0.0
        started = time.perf_counter()
        self._wait_for(compiled.evaluation)
        policy_params, stats = self.trainer.learner.acting(state)
        result = jax.device_get(compiled.evaluate(policy_params, stats, eval_key(config.run.seed, iteration)))
        report = after_eval(report, result, rules, last)
        assert report.eval_row is not None, "an evaluated iteration has its eval row"
        self.sinks.write("eval", report.eval_row)
        return report, time.perf_counter() - started

    def _save_due(self, state: Any, progress: Progress, loop: LoopRecord, last: bool, watch: GraceWatch | None
                  ) -> None:
        """The checkpoint `run.save_interval` asks for (or the last), then the watcher's note of the iteration."""
        checkpointer = self.checkpointer
        if checkpointer is not None:
            with self._lock(watch):
                self._timed_save(lambda: checkpointer.after_iteration(self.trainer, state, progress, final=last))
        self._loop = loop
        if watch is not None and not last:  # a watcher runs only with a checkpointer (`_grace_watch`)
            assert checkpointer is not None, "the stop grace's watcher runs with a checkpointer"
            watch.slowest_save_s = self._slowest_save_s
            watch.iteration_ended(state, progress, saved=checkpointer.last_saved == progress.iteration)

    def _agreed(self, stop: str | None) -> str | None:
        """Over several processes every process stops after the same iteration: OTHER_PROCESS where another had a
        reason and this one none (a collective, on every process after every iteration but the last)."""
        if process_count() > 1 and any_process(stop is not None) and stop is None:
            return OTHER_PROCESS
        return stop

    def _stop(self, state: Any, progress: Progress, stop: str, watch: GraceWatch | None, loop: LoopRecord
              ) -> RunResult:
        """Ends the run before the plan's end: a checkpoint of this iteration (unless saved), then the summary."""
        with self._lock(watch):
            if watch is not None:
                watch.handled()
            if self.checkpointer is not None:
                self.checkpointer.save(self.trainer, state, progress)
        if stop not in SIGNAL_NAMES:  # a signal's stop is said by the caller, with its exit code
            self._say(f"rlfit: stopped by {stop} at iteration {progress.iteration}")
        return self._end(state, progress, stop, loop)

    def _end(self, state: Any, progress: Progress, stopped_by: str | None, loop: LoopRecord) -> RunResult:
        summary = self._write_summary(state, progress, loop, stopped_by)
        return RunResult(state, progress, summary, self.run_dir, stopped_by)

    # Around the loop: compiling, the starting state, back-off, the stop grace, the summary.

    def _start_compiling(self, total: int) -> tuple[Trainer, Compiled | Exception]:
        """Starts the trainer's compiles in the background (`Trainer.compile`); the trainer they are for, and
        them or the error that starting them raised (raised again in `_train`, where a back-off handles it)."""
        try:
            return self.trainer, self.trainer.compile(say=self._say, total=total)
        except Exception as error:  # noqa: BLE001 - raised again by `_compiled_for`
            return self.trainer, error

    def _compiled_for(self, state: Any) -> Compiled:
        """The programs started by `run` when they are for this trainer and `state`'s shapes, else new ones (after a
        back-off, the trainer's sizes changed)."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] is self.trainer:
            programs = pending[1]
            if isinstance(programs, Exception):
                raise programs
            if same_abstract(programs.abstract, self.trainer.abstract_of(state)):
                return programs
        return self.trainer.compile(state, say=self._say)

    def _fresh_state(self, progress: Progress) -> Any:
        """The starting state, backing off to smaller sizes while creating it runs out of memory (a large
        replay buffer is allocated here)."""
        from rlfit.planning.out_of_memory import is_out_of_memory

        while True:
            try:
                state, self._starting_program = self.trainer.starting_state(say=self._say)
                return state
            except Exception as error:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
                if not is_out_of_memory(error):
                    raise
                agree_to_back_off(self.trainer, len(self._events))
                self._adopt(smaller(self.trainer, str(error), progress, "init"), progress)

    def _adopt(self, backed: BackOff, progress: Progress) -> None:
        """Trains on with a back-off's trainer, recording it: the event (in `progress`, metrics.jsonl rewound to
        its iteration), plan.json, the console's totals."""
        self.trainer = backed.trainer
        self._events.append(backed.event)
        progress.events = list(self._events)
        self.sinks.rewind(progress.iteration)
        self.sinks.write("event", backed.event)
        if is_writer():
            write_json(self.run_dir.plan, backed.plan.to_dict())
        self._say(f"rlfit: {backed.reason}")
        if self.console is not None:
            self.console.retarget(backed.plan.num_iterations, config_total_steps(backed.trainer.config, backed.plan))

    def _grace_watch(self, rules: StopRules, progress: Progress) -> GraceWatch | None:
        """The watcher that keeps `run.stop_grace_s` (`rlfit.run.stop_grace`), started; None where there is no
        grace, no checkpointer, or several processes (said in one line: a checkpoint needs every process)."""
        grace_s = self.trainer.config.run.stop_grace_s
        if not grace_s or self.checkpointer is None or self.stop_flag is None:
            return None
        if process_count() > 1:
            self._say(f"rlfit: run.stop_grace_s={grace_s:g} is not kept over several processes (a checkpoint needs "
                      "every process): a stop saves at the end of the running iteration")
            return None
        watch = GraceWatch(grace_s, rules.time_budget_s, self._save_within_grace, self._say,
                           saved_iteration=self.checkpointer.latest_step(), start=progress)
        self._grace = watch
        watch.start()
        return watch

    @staticmethod
    def _lock(watch: GraceWatch | None) -> Any:
        """The watcher's lock (held while the main thread saves or handles a stop), or nothing."""
        return watch.lock if watch is not None else contextlib.nullcontext()

    def _save_within_grace(self, host_state: Any | None, progress: Progress, reason: str) -> None:
        """The watcher's save (its thread, JAX's CPU device): the last finished iteration's checkpoint, when it has a
        host copy newer than the newest checkpoint (`host_state`; None: nothing newer), and the summary."""
        assert self.checkpointer is not None and self._loop is not None, "the watcher runs in a started loop that saves"
        if host_state is not None:
            self.checkpointer.save(self.trainer, host_state, progress, force=True)
        self._write_summary(host_state, progress, self._loop, reason)

    def _write_summary(self, state: Any, progress: Progress, loop: LoopRecord, stopped_by: str | None
                       ) -> dict[str, Any]:
        """Writes summary.json for the session so far (at the end, or when the run stops)."""
        # The programs this session compiled and that have finished (an evaluation still compiling in the background
        # when a signal stops the run is left out), in the order the console numbers them.
        programs = loop.compiled.programs + ((self._starting_program,) if self._starting_program is not None else ())
        summary = run_summary(self.trainer, state, progress, compile_s=sum(program.compile_s for program in programs),
                              compile_reused=loop.compiled.reused, init_s=self._init_s,
                              train_wall_s=time.perf_counter() - loop.started, session_steps=loop.session_steps,
                              eval_s=loop.eval_s, compile_wait_s=self._compile_wait_s, stopped_by=stopped_by,
                              programs=programs, time_to_first_step_s=self._time_to_first_step_s)
        grace = self._grace.record() if self._grace is not None else None
        written = extended(summary, SessionSummary, stop_grace=grace).to_json()
        if is_writer():
            write_json(self.run_dir.summary, written)
        return written

    def _timed_save(self, save: Any) -> None:
        """Runs a checkpoint call, keeping the slowest seen (what a time budget must leave room for)."""
        save_started = time.perf_counter()
        save()
        self._slowest_save_s = max(self._slowest_save_s, time.perf_counter() - save_started)

    def _wait_for(self, program: Any) -> float:
        """Waits for a program's compile (a future); the seconds waited, also added to `compile_wait_s`."""
        started = time.perf_counter()
        program.result()
        waited = time.perf_counter() - started
        self._compile_wait_s += waited
        return waited

    def _non_finite_message(self, report: StepReport, metrics: Any) -> str:
        from rlfit.algos.registry import algorithm

        where = "no checkpoint was written yet"
        if self.checkpointer is not None and self.checkpointer.latest_step() is not None:
            where = f"last good checkpoint: iteration {self.checkpointer.latest_step()} in {self.run_dir.checkpoints}"
        row = self.trainer.learner.metrics_row(metrics)
        return (f"training became non-finite at iteration {report.progress.iteration}: {first_non_finite(row)}; "
                f"this state was not saved ({where}); {algorithm(self.trainer.config.algo).non_finite_hint}")

    def _say(self, text: str) -> None:
        if self.console is not None:
            self.console.message(text)
