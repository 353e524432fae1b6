"""The host loop: run compiled iterations, log, evaluate, checkpoint, stop cleanly.

    compile -> for each iteration: step -> log -> (evaluate) -> (checkpoint) -> (stop on signal) -> summary

Everything inside an iteration is one compiled call; this loop only moves a few scalars to the host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from rlfit.exit_codes import NON_FINITE
from rlfit.hardware.compile_log import ProgramCompile, seconds_since_process_start
from rlfit.parallel.distributed import all_reach, any_process, is_writer, process_count
from rlfit.hardware.probe import peak_bytes_in_use
from rlfit.rundir.layout import RunDir, write_json
from rlfit.sinks import Sinks
from rlfit.run.stop_grace import GraceWatch
from rlfit.run.stopping import StopRules
from rlfit.run.build import Compiled, Trainer, forget_programs
from rlfit.run.evaluate import randomized_row
from rlfit.versions import package_versions

EXIT_NON_FINITE = NON_FINITE
BACK_OFF_WAIT_S = 120.0
"""Over several processes, how long one that ran out of memory waits for all the others to run out too (they
back off together, to the same sizes, from the same checkpoint) before it stops the run instead."""


class NonFiniteError(Exception):
    """Training produced NaN or infinity; the state was not saved."""

    exit_code = EXIT_NON_FINITE


@dataclass
class Progress:
    """Host-side counters (exact Python integers, checkpointed with the state)."""

    iteration: int = 0
    env_steps: int = 0
    best_eval_reward: float | None = None
    last_eval_reward: float | None = None
    evals_without_improvement: int = 0
    """Evaluations in a row that did not beat the best by more than `run.early_stop_min_delta`."""
    last_description_length_bits: float | None = None
    """The policy's mean description length of an observation at the last evaluation (a bottleneck's rate)."""
    last_randomized_eval_reward: float | None = None
    """With domain randomization: the last evaluation's mean return on freshly drawn models."""
    events: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_record(cls, saved: dict[str, Any]) -> Progress:
        """The counters from a checkpoint's record (its meta.json `progress`)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in saved.items() if k in names})


@dataclass
class RunResult:
    """What `run` returns: the final state, its counters and the summary written to disk."""

    state: Any
    progress: Progress
    summary: dict[str, Any]
    run_dir: RunDir


def eval_key(seed: int, iteration: int) -> jax.Array:
    """The evaluation key for an iteration: a pure function of seed and iteration, so resume repeats it."""
    return jax.random.fold_in(jax.random.PRNGKey(seed ^ 0x5EED), iteration)


def same_abstract(one: Any, other: Any) -> bool:
    """Whether two abstract states (`Trainer.abstract_of`) have the same structure, shapes, dtypes and shardings."""
    if jax.tree.structure(one) != jax.tree.structure(other):
        return False
    return all((a.shape, a.dtype, a.sharding) == (b.shape, b.dtype, b.sharding)
               for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(other), strict=True))


def params_digest(params: Any) -> str:
    """sha256 of the parameters' bytes, leaf by leaf in tree order."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(params)):
        digest.update(np.ascontiguousarray(leaf).tobytes())
    return digest.hexdigest()


def train_row(progress: Progress, metrics: Any, algorithm_row: dict[str, Any], iteration_s: float, wall_s: float,
              steps: int) -> dict[str, Any]:
    """The metrics.jsonl row of one iteration (`sps` = env steps of the iteration / its wall time).

    `algorithm_row` holds the algorithm's own fields (`Learner.metrics_row`); an `updates` count among them
    also gives `updates_per_s`.
    """
    row: dict[str, Any] = {
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


def config_total_steps(config: Any, plan: Any) -> int:
    """Env steps the run will have made at its last iteration (for progress display)."""
    return max(config.run.num_timesteps, plan.num_iterations * plan.env_steps_per_iteration)


def first_non_finite(row: dict[str, Any]) -> str:
    """The first non-finite value of an algorithm's metrics row ('loss/critic = nan'), else 'the parameters'."""
    for name, value in row.items():
        if isinstance(value, float) and not np.isfinite(value):
            return f"{name} = {value}"
    return "the parameters"


def record_eval(progress: Progress, result: Any, min_delta: float) -> dict[str, Any]:
    """Updates `progress` with an evaluation's result (host `EvalMetrics`) and returns its metrics.jsonl row."""
    reward = float(result.episode_reward)
    progress.evals_without_improvement = StopRules.evals_without_improvement(
        progress.evals_without_improvement, reward, progress.best_eval_reward, min_delta)
    progress.last_eval_reward = reward
    if progress.best_eval_reward is None or reward > progress.best_eval_reward:
        progress.best_eval_reward = reward
    row = {"iteration": progress.iteration, "env_steps": progress.env_steps, "eval/episode_reward": reward,
           "eval/episode_reward_std": float(result.episode_reward_std),
           "eval/episode_length": float(result.episode_length)}
    if result.rate_bits is not None:  # the policy's description length of an observation
        progress.last_description_length_bits = row["eval/description_length_bits"] = float(result.rate_bits)
    row.update(randomized_row(result))  # with domain randomization: the same on freshly drawn models
    progress.last_randomized_eval_reward = row.get("eval/randomized/episode_reward")
    return row


def run_summary(trainer: Trainer, state: Any, progress: Progress, *, compile_s: float, compile_reused: bool,
                init_s: float, train_wall_s: float, session_steps: int, eval_s: float,
                stopped_by: str | None, programs: tuple[ProgramCompile, ...] = (),
                time_to_first_step_s: float | None = None, compile_wait_s: float = 0.0) -> dict[str, Any]:
    """summary.json of a session of `trainer`'s run that ended at `state`/`progress`. `programs`: each compiled
    program's name, seconds and whether the persistent cache supplied it (empty when this process's programs were
    reused); `time_to_first_step_s`: to the end of the session's first training step from the process's start (from
    the session's start for a later run in the same process, an experiment's next trial); `compile_wait_s`: how
    long the session waited for programs compiling in the background (`Trainer.compile`) once it needed them."""
    plan = trainer.plan
    peaks = [peak for peak in map(peak_bytes_in_use, trainer.layout.local_devices()) if peak is not None]
    return {
        "env": trainer.config.env.name,
        "final_eval_reward": progress.last_eval_reward,
        "best_eval_reward": progress.best_eval_reward,
        "final_eval_reward_randomized": progress.last_randomized_eval_reward,
        "randomization": trainer.randomization.to_dict(),
        "final_description_length_bits": progress.last_description_length_bits,
        "iterations": progress.iteration,
        "env_steps": progress.env_steps,
        "session_env_steps": session_steps,
        "train_wall_s": train_wall_s,
        "compile_s": compile_s,
        "compile_reused": compile_reused,
        "compile_wait_s": compile_wait_s,
        "programs": [program.as_dict() for program in programs],
        "time_to_first_step_s": time_to_first_step_s,
        "init_s": init_s,
        "eval_s": eval_s,
        "sps_mean": session_steps / train_wall_s if train_wall_s > 0 else None,
        "device": plan.device,
        "backend": plan.backend,
        "impl": plan.impl,
        "sizes": plan.sizes._asdict(),
        "preset": plan.preset,
        "predicted_bytes": plan.predicted_bytes,
        "devices": trainer.layout.describe(),
        "device_peak_bytes": max(peaks, default=None),
        "device_peak_bytes_per_device": peaks or None,
        "events": progress.events,
        "stopped_by": stopped_by,
        "versions": package_versions(),
        "params_digest": params_digest(state.params) if state is not None else None,
    }


_PROCESS_FIRST_STEP = {"taken": False}
"""Whether a run of this process has taken its first training step (its time is counted from the process's start)."""


class Runner:
    """Runs a Trainer's plan to the end, writing into a run directory."""

    def __init__(self, trainer: Trainer, run_dir: RunDir, sinks: Sinks, checkpointer: Any | None = None,
                 stop_flag: Any | None = None, console: Any | None = None, sampler: Any | None = None):
        self.trainer = trainer
        self.sampler = sampler
        """A started `UtilizationSampler` (GPU utilization and memory into each train row), or None."""
        self.run_dir = run_dir
        self.sinks = sinks
        self.checkpointer = checkpointer
        self.stop_flag = stop_flag
        self.console = console
        self._time_to_first_step_s: float | None = None
        """Seconds to the end of the session's first training step (`_since_start`), set once by that step."""
        self._grace: GraceWatch | None = None
        """The watcher keeping `run.stop_grace_s` while the loop runs (`rlfit.run.stop_grace`), or None."""
        self._loop_record: tuple[Any, float, int, float] | None = None
        """(compiled programs, loop start, session env steps, evaluation seconds) at the last finished iteration,
        for the summary the watcher writes."""

    def run(self, state: Any | None = None, progress: Progress | None = None) -> RunResult:
        """Trains from `state`/`progress` (fresh when None) to the plan's last iteration.

        On RESOURCE_EXHAUSTED (compiling or stepping) it backs off to the next smaller valid sizes, recompiles
        and continues from the newest checkpoint or this session's starting state, recording the event.
        """
        progress = progress or Progress()
        self._events = list(progress.events)
        self._session_started = started = time.perf_counter()
        self._slowest_save_s = 0.0
        fresh = state is None
        self._starting_program: ProgramCompile | None = None
        self._compile_wait_s = 0.0
        # The training step and the evaluation compile in the background while the starting state is built (and
        # saved); a compile that fails is raised where the program is needed, in `_train`.
        self._pending = self._start_compiling(total=3 if fresh else 2)
        state = self._fresh_state(progress) if fresh else state
        self._init_s = time.perf_counter() - started  # includes compiling the starting state's program
        if self.checkpointer is not None and self.checkpointer.latest_step() is None:
            self._timed_save(lambda: self.checkpointer.save(state, progress))  # before compiling: a kill at any
            # instant leaves a resumable run
        # What an out-of-memory back-off continues from: the newest checkpoint, which holds this session's start
        # or later; a host copy of the starting state only when nothing could be saved (a replay buffer can be
        # most of the host's memory). Over several processes always the checkpoint, which every process reads.
        saved = self.checkpointer is not None and self.checkpointer.latest_step() is not None
        start = (jax.device_get(state) if process_count() == 1 and not saved else None,
                 dataclasses.replace(progress, events=list(progress.events)))
        save_first = False
        while True:
            try:
                return self._train(state, progress, save_first)
            except Exception as error:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
                from rlfit.planning.backoff import is_out_of_memory

                if not is_out_of_memory(error):
                    raise
                message = str(error)
            # Outside the handler: the exception, its traceback and the failed iteration's buffers they hold are
            # released before anything is reloaded.
            state = None
            state, progress = self._back_off(message, start)
            save_first = self.checkpointer is not None  # the environments changed size

    def _train(self, state: Any, progress: Progress, save_first: bool) -> RunResult:
        plan, config = self.trainer.plan, self.trainer.config
        state = self.trainer.place(state)  # restored or resized states arrive on one device
        compiled = self._compiled_for(state)
        if save_first:  # the environments changed size (after a back-off): save the state they start from
            self.checkpointer.save(state, progress, force=True)
        waited = self._wait_for(compiled.step)  # raises the compile's error, if any
        done = "reused this process's compiled programs" if compiled.reused else \
            f"training step ready (waited {waited:.1f}s for its compile)"
        self._say(f"{done} on {plan.device}; "
                  f"{plan.num_iterations - progress.iteration} iterations of {plan.env_steps_per_iteration:,} steps")
        rules = StopRules.from_config(config.run)
        started = time.perf_counter()
        self._loop_record = (compiled, started, 0, 0.0)
        watch = self._grace_watch(rules, progress)
        try:
            return self._iterate(state, progress, compiled, rules, started, watch)
        finally:
            if watch is not None:
                watch.stop()

    def _iterate(self, state: Any, progress: Progress, compiled: Compiled, rules: StopRules, started: float,
                 watch: GraceWatch | None) -> RunResult:
        plan, config = self.trainer.plan, self.trainer.config
        lock = watch.lock if watch is not None else contextlib.nullcontext()
        session_steps = 0
        eval_s = 0.0
        slowest_step_s = 0.0  # an iteration with its evaluation, the slowest of this session
        while progress.iteration < plan.num_iterations:
            stop_reason = None
            step_started = time.perf_counter()
            if watch is not None:
                watch.iteration_started()
            state, metrics, seconds = self._step(compiled, state)
            if self._time_to_first_step_s is None:
                self._time_to_first_step_s = self._since_start()
            progress.iteration += 1
            progress.env_steps += plan.env_steps_per_iteration
            session_steps += plan.env_steps_per_iteration
            algorithm_row = self.trainer.learner.metrics_row(metrics)
            if not bool(metrics.all_finite):
                raise NonFiniteError(self._non_finite_message(progress, algorithm_row))
            row = train_row(progress, metrics, algorithm_row, seconds, time.perf_counter() - started,
                            plan.env_steps_per_iteration)
            self.sinks.write("train", {**row, **(self.sampler.take() if self.sampler is not None else {})})
            last = progress.iteration == plan.num_iterations
            if last or (config.run.eval_every and progress.iteration % config.run.eval_every == 0):
                eval_started = time.perf_counter()
                self._evaluate(compiled, state, progress)
                eval_s += time.perf_counter() - eval_started
                stop_reason = rules.after_eval(progress.last_eval_reward, progress.evals_without_improvement)
            slowest_step_s = max(slowest_step_s, time.perf_counter() - step_started)
            if self.checkpointer is not None:
                with lock:
                    self._timed_save(lambda: self.checkpointer.after_iteration(state, progress, final=last))
            self._loop_record = (compiled, started, session_steps, eval_s)
            if watch is not None and not last:
                watch.slowest_save_s = self._slowest_save_s
                watch.iteration_ended(state, progress, saved=self.checkpointer.last_saved == progress.iteration)
            stop_reason = stop_reason or rules.before_next(time.perf_counter() - self._session_started,
                                                           slowest_step_s + self._slowest_save_s)
            signalled = self.stop_flag is not None and self.stop_flag.requested
            if process_count() > 1 and not last and any_process(stop_reason is not None or signalled) \
                    and stop_reason is None and not signalled:
                stop_reason = "a stop on another process"  # every process stops after the same iteration
            if stop_reason is not None and not last:
                with lock:
                    if watch is not None:
                        watch.handled()
                    if self.checkpointer is not None:
                        self.checkpointer.save(state, progress)
                self._say(f"rlfit: stopped by {stop_reason} at iteration {progress.iteration}")
                summary = self._write_summary(state, progress, compiled, started, session_steps, eval_s, stop_reason)
                return RunResult(state, progress, summary, self.run_dir)
            if signalled and not last:
                with lock:
                    if watch is not None:
                        watch.handled()
                    if self.checkpointer is not None:
                        self.checkpointer.save(state, progress)
                stopped_by = self.stop_flag.signal_name
                self._write_summary(state, progress, compiled, started, session_steps, eval_s, stopped_by)
                self.stop_flag.exit()
        summary = self._write_summary(state, progress, compiled, started, session_steps, eval_s, None)
        return RunResult(state, progress, summary, self.run_dir)

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

    def _save_within_grace(self, host_state: Any | None, progress: Progress, reason: str) -> None:
        """The watcher's save (its thread, JAX's CPU device): the last finished iteration's checkpoint, when it has a
        host copy newer than the newest checkpoint (`host_state`; None: nothing newer), and the summary."""
        if host_state is not None:
            self.checkpointer.save(host_state, progress, force=True)
        compiled, started, session_steps, eval_s = self._loop_record
        self._write_summary(host_state, progress, compiled, started, session_steps, eval_s, reason)

    def _write_summary(self, state: Any, progress: Progress, compiled: Compiled, started: float,
                       session_steps: int, eval_s: float, stopped_by: str | None) -> dict[str, Any]:
        """Writes summary.json for the session so far (at the end, or when a signal stops the run)."""
        summary = self._summary(state, progress, compiled, time.perf_counter() - started, session_steps, eval_s,
                                stopped_by)
        summary["stop_grace"] = self._grace.record() if self._grace is not None else None
        if is_writer():
            write_json(self.run_dir.summary, summary)
        return summary

    def _since_start(self) -> float:
        """Seconds since the process started, for its first run; since this session started, for a later run in
        the same process (an experiment's next trial)."""
        if not _PROCESS_FIRST_STEP["taken"]:
            _PROCESS_FIRST_STEP["taken"] = True
            return seconds_since_process_start()
        return time.perf_counter() - self._session_started

    def _timed_save(self, save: Any) -> None:
        """Runs a checkpoint call, keeping the slowest seen (what a time budget must leave room for)."""
        save_started = time.perf_counter()
        save()
        self._slowest_save_s = max(self._slowest_save_s, time.perf_counter() - save_started)

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
        trainer, pending = self._pending
        self._pending = (None, None)
        if trainer is self.trainer and isinstance(pending, Exception):
            raise pending
        if trainer is self.trainer and same_abstract(pending.abstract, self.trainer.abstract_of(state)):
            return pending
        return self.trainer.compile(state, say=self._say)

    def _fresh_state(self, progress: Progress) -> Any:
        """The starting state, backing off to smaller sizes while creating it runs out of memory (a large
        replay buffer is allocated here)."""
        from rlfit.planning.backoff import is_out_of_memory

        while True:
            try:
                state, self._starting_program = self.trainer.starting_state(say=self._say)
                return state
            except Exception as error:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
                if not is_out_of_memory(error):
                    raise
                self._agree_to_back_off()
                self._shrink(str(error), progress, "init")

    def _agree_to_back_off(self) -> None:
        """Over several processes (with back-off allowed): returns once every process has run out of memory too,
        so that all back off together, to the same sizes, before any of them computes on arrays again; raises
        OutOfMemory when one has not within BACK_OFF_WAIT_S (it may be waiting for this one in a collective)."""
        from rlfit.planning.backoff import OutOfMemory

        config, sizes = self.trainer.config, self.trainer.plan.sizes
        if process_count() == 1 or not config.run.oom_backoff:
            return
        if not all_reach(f"rlfit-out-of-memory-{len(self._events)}", BACK_OFF_WAIT_S):
            raise OutOfMemory(f"out of device memory at {config.algo}.num_envs={sizes.num_envs} on process "
                              f"{jax.process_index()} but not on every process of the run within {BACK_OFF_WAIT_S:.0f} "
                              f"s, so it cannot back off; lower {config.algo}.num_envs or use --num-envs auto") from None

    def _back_off(self, message: str, start: tuple[Any, Progress]) -> tuple[Any, Progress]:
        """Smaller sizes after an out-of-memory error (its message); the state to continue from and its counters."""
        self._agree_to_back_off()
        state, progress = self._last_good_state(start)
        self._shrink(message, progress, "step")
        env_key = jax.random.fold_in(state.key, progress.iteration)
        return self.trainer.learner.resize(state, env_key), progress

    def _shrink(self, message: str, progress: Progress, where: str) -> None:
        """Rebuilds the trainer at the next smaller sizes (or raises OutOfMemory), recording why everywhere."""
        from rlfit.algos.registry import algorithm
        from rlfit.planning.backoff import OutOfMemory, out_of_memory_message

        old = self.trainer
        allowed = old.config.run.oom_backoff
        sizes = algorithm(old.config.algo).smaller_sizes(old.plan.sizes, where) if allowed else None
        if sizes is not None and sizes.num_envs % old.plan.devices:
            sizes = None  # smaller sizes must still split evenly over the run's devices
        if sizes is None:
            raise OutOfMemory(out_of_memory_message(old.config.algo, old.plan.sizes.num_envs, allowed)) from None
        smaller = ", ".join(f"{name}={value}" for name, value in sizes._asdict().items()
                            if value != getattr(old.plan.sizes, name))
        doing = "creating the starting state" if where == "init" else f"iteration {progress.iteration}"
        reason = f"out of memory at num_envs={old.plan.sizes.num_envs} ({doing}); backed off to {smaller}"
        plan = old.plan.with_sizes(sizes, old.config, (progress.iteration, progress.env_steps), reason)
        forget_programs()  # memory is short: release programs kept for other seeds
        self.trainer = Trainer.build(old.config, plan, env=old.env)
        if self.checkpointer is not None:
            self.checkpointer.trainer = self.trainer
        event = {"event": "out_of_memory_backoff", "iteration": progress.iteration, "env_steps": progress.env_steps,
                 "from": old.plan.sizes._asdict(), "to": sizes._asdict(), "error": message.splitlines()[0][:300]}
        self._events.append(event)
        progress.events = list(self._events)
        self.sinks.rewind(progress.iteration)
        self.sinks.write("event", event)
        if is_writer():
            write_json(self.run_dir.plan, plan.to_dict())
        self._say(f"rlfit: {reason}")
        if self.console is not None:
            self.console.retarget(plan.num_iterations, config_total_steps(old.config, plan))

    def _last_good_state(self, start: tuple[Any, Progress]) -> tuple[Any, Progress]:
        """The session's host copy of its start when it kept one, else the newest checkpoint (at or past the
        session's start), read with the sizes its own record names (a second back-off can come before the
        first one's sizes were saved) and its replay buffer refilled if it was saved without one."""
        start_state, start_progress = start
        if start_state is None:
            from rlfit.checkpoints.format import dropped_leaves
            from rlfit.run.restore import restore_newest

            trainer, state, meta = restore_newest(self.run_dir, self.trainer.config)
            if dropped_leaves(meta):
                state = trainer.learner.refill(state)
            return state, Progress.from_record(meta.progress)
        state = jax.tree.map(jax.numpy.asarray, start_state)
        return state, dataclasses.replace(start_progress, events=list(start_progress.events))

    def _step(self, compiled: Compiled, state: Any) -> tuple[Any, Any, float]:
        started = time.perf_counter()
        state, metrics = compiled.iteration(state)
        metrics = jax.device_get(metrics)  # waits for the iteration to finish
        return state, metrics, time.perf_counter() - started

    def _wait_for(self, program: Any) -> float:
        """Waits for a program's compile (a future); the seconds waited, also added to `compile_wait_s`."""
        started = time.perf_counter()
        program.result()
        waited = time.perf_counter() - started
        self._compile_wait_s += waited
        return waited

    def _evaluate(self, compiled: Compiled, state: Any, progress: Progress) -> None:
        self._wait_for(compiled.evaluation)
        policy_params, stats = self.trainer.learner.acting(state)
        result = jax.device_get(compiled.evaluate(policy_params, stats,
                                                  eval_key(self.trainer.config.run.seed, progress.iteration)))
        self.sinks.write("eval", record_eval(progress, result, self.trainer.config.run.early_stop_min_delta))

    def _non_finite_message(self, progress: Progress, row: dict[str, Any]) -> str:
        from rlfit.algos.registry import algorithm

        where = "no checkpoint was written yet"
        if self.checkpointer is not None and self.checkpointer.latest_step() is not None:
            where = f"last good checkpoint: iteration {self.checkpointer.latest_step()} in {self.run_dir.checkpoints}"
        return (f"training became non-finite at iteration {progress.iteration}: {first_non_finite(row)}; "
                f"this state was not saved ({where}); {algorithm(self.trainer.config.algo).non_finite_hint}")

    def _summary(self, state: Any, progress: Progress, compiled: Compiled, train_wall_s: float,
                 session_steps: int, eval_s: float, stopped_by: str | None) -> dict[str, Any]:
        programs = self._programs(compiled)
        return run_summary(self.trainer, state, progress, compile_s=sum(program.compile_s for program in programs),
                           compile_reused=compiled.reused, init_s=self._init_s, train_wall_s=train_wall_s,
                           session_steps=session_steps, eval_s=eval_s, compile_wait_s=self._compile_wait_s,
                           stopped_by=stopped_by, programs=programs,
                           time_to_first_step_s=self._time_to_first_step_s)

    def _programs(self, compiled: Compiled) -> tuple[ProgramCompile, ...]:
        """The programs this session compiled and that have finished (an evaluation still compiling in the
        background when a signal stops the run is left out), in the order the console numbers them."""
        return compiled.programs + ((self._starting_program,) if self._starting_program is not None else ())

    def _say(self, text: str) -> None:
        if self.console is not None:
            self.console.message(text)
