"""The host loop's own state, as immutable records (each change makes a new one), and the pure functions of its lanes
that `rlfit.run.loop.Runner` decides with: which lanes still train, where they are, whether the processes agree to
stop. Nothing here touches a device or a file.

    times = SessionTimes(time.perf_counter()).after_save(1.2)   # the slowest save so far: 1.2 s
    loop = LoopRecord(compiled, started).after(env_steps, eval_s, step_s)
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, NamedTuple

from rlfit.algos.contract import TrainState
from rlfit.hardware.compile_log import ProgramCompile
from rlfit.parallel.distributed import any_process, process_count
from rlfit.run.after_step import OTHER_PROCESS
from rlfit.run.progress import Progress
from rlfit.run.trainer import Compiled

if TYPE_CHECKING:
    from rlfit.run.lanes import Lane
    from rlfit.run.stop_grace import GraceWatch


class LoopRecord(NamedTuple):
    """The loop's own counters at the last finished iteration (what summary.json reports about the session)."""

    compiled: Compiled[TrainState]
    started: float
    """`time.perf_counter()` when the loop started."""
    session_steps: int = 0
    """Env steps per lane this session."""
    eval_s: float = 0.0
    slowest_step_s: float = 0.0
    """The slowest iteration with its evaluation (its save apart) of this loop."""

    def after(self, env_steps: int, eval_s: float, step_s: float) -> LoopRecord:
        return self._replace(session_steps=self.session_steps + env_steps, eval_s=self.eval_s + eval_s,
                             slowest_step_s=max(self.slowest_step_s, step_s))


class SessionTimes(NamedTuple):
    """The session's timings outside the loop's iterations (what summary.json reports besides `LoopRecord`)."""

    started: float
    """`time.perf_counter()` when the session started."""
    init_s: float = 0.0
    """Seconds to build the starting state (its program's compile included)."""
    slowest_save_s: float = 0.0
    """The slowest checkpoint call so far (what a time budget must leave room for)."""
    compile_wait_s: float = 0.0
    """Seconds the loop waited for the programs' compiles."""
    time_to_first_step_s: float | None = None
    """To the end of the session's first iteration (`rlfit.hardware.compile_log.time_to_first_step`); None before."""
    starting_program: ProgramCompile | None = None
    """The starting state's program, where this session compiled one (a fresh run)."""

    def after_save(self, seconds: float) -> SessionTimes:
        return self._replace(slowest_save_s=max(self.slowest_save_s, seconds))

    def after_wait(self, seconds: float) -> SessionTimes:
        return self._replace(compile_wait_s=self.compile_wait_s + seconds)

    def programs(self, compiled: Compiled[TrainState]) -> tuple[ProgramCompile, ...]:
        """The programs this session compiled and that have finished (an evaluation still compiling in the background
        when a signal stops the run is left out), in the order the console numbers them."""
        return compiled.programs + ((self.starting_program,) if self.starting_program is not None else ())


class LanesAt(NamedTuple):
    """The lanes still training and their counters after an iteration (what the stop grace's watcher saves)."""

    iteration: int
    lanes: tuple[tuple[int, Progress], ...]
    """(lane index, its counters)."""

    def copy(self) -> LanesAt:
        return LanesAt(self.iteration, tuple((index, progress.copy()) for index, progress in self.lanes))


def still_training(lanes: list[Lane]) -> list[tuple[int, Lane]]:
    """The lanes still training (no result yet), with their indices."""
    return [(index, lane) for index, lane in enumerate(lanes) if lane.result is None]


def lanes_at(lanes: list[Lane]) -> LanesAt:
    """Where the lanes still training are: their iteration (the same for all) and counters."""
    training = still_training(lanes)
    return LanesAt(training[0][1].progress.iteration, tuple((index, lane.progress) for index, lane in training))


def agreed(stop: str | None) -> str | None:
    """Over several processes every process stops after the same iteration: OTHER_PROCESS where another had a
    reason and this one none (a collective, on every process after every iteration but the last)."""
    if process_count() > 1 and any_process(stop is not None) and stop is None:
        return OTHER_PROCESS
    return stop


def grace_lock(watch: GraceWatch[LanesAt] | None) -> Any:
    """The stop grace watcher's lock (held while the main thread saves or handles a stop), or nothing."""
    return watch.lock if watch is not None else contextlib.nullcontext()
