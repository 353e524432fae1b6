"""A stop request leaves a checkpoint within `run.stop_grace_s`, even when one iteration takes longer.

Batch schedulers and preemptible machines kill a process about 30 s after SIGTERM (SLURM's KillWait, Kubernetes'
grace period, spot VMs' notice). The runner answers a stop at the end of an iteration; where iterations take
minutes (Playground's settings on a CPU, a large G1 run) that is too late. So, where iterations are longer than
the grace:

- after each finished iteration the runner keeps a host copy of its state (`GraceWatch.keep`: one copy of the
  state's arrays in host memory, taken between iterations; its seconds are recorded as `stop_grace.copy_s_max`);
- a watcher thread hears the signal at once (`signal.set_wakeup_fd`: Python's handler runs only when the main
  thread is back from XLA, the watcher does not wait for that), and when the running iteration would not end in
  time it saves that copy as the checkpoint of the last finished iteration, on JAX's CPU device (a computation on
  the accelerator would queue behind the running iteration), writes summary.json and ends the process with the
  signal's exit code. The running iteration is lost; nothing before it is.

The same holds for `run.time_budget`: where the running iteration would end after the budget, the watcher saves
the copy when the budget runs out, less the grace's reserve. Over several processes the checkpoint needs every
process, so the grace cannot be kept there: the runner says so in one line at the start.

    watch = GraceWatch(grace_s, budget_s, save, say)   # save(host_state, progress, reason) -> None, then exit
    watch.start(); ...; watch.iteration_started(); ...; watch.keep(state, progress) ...; watch.stop()
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Generic, Protocol, Self, TypeVar

import jax
import numpy as np

from rlfit.algos.contract import TrainState
from rlfit.console import warn_line
from rlfit.run.signals import EXIT_CODES

RESERVE_MIN_S = 1.0
"""The least time kept for the emergency save itself (its first CPU compile of the checksums included)."""


def reserve_s(grace_s: float, slowest_save_s: float) -> float:
    """How long before the grace runs out the watcher starts saving: twice the slowest save seen, at least
    RESERVE_MIN_S, at most half the grace."""
    return min(grace_s / 2, max(RESERVE_MIN_S, 2 * slowest_save_s))


def host_copy(state: TrainState) -> TrainState:
    """A copy of `state`'s arrays in host memory (numpy), independent of the device buffers (which the next
    iteration may donate and overwrite)."""
    copy: TrainState = jax.tree.map(lambda leaf: np.array(leaf, copy=True), jax.device_get(state))
    return copy


class Counters(Protocol):
    """What the watcher reads of the counters a save writes (the loop's `LanesAt`)."""

    @property
    def iteration(self) -> int:
        """The last finished iteration."""

    def copy(self) -> Self:
        """A copy the running loop does not change."""


CountersT = TypeVar("CountersT", bound=Counters)


class GraceWatch(Generic[CountersT]):
    """Keeps the last finished iteration on the host when iterations outlast the grace, and saves it when a stop
    cannot wait for the running iteration. `save(host_state, progress, reason)` writes the checkpoint (where
    `host_state` is not None: a copy newer than the newest checkpoint) and the summary; it runs on the watcher
    thread, under `jax.default_device(cpu)`, and the watcher then ends the process."""

    def __init__(self, grace_s: float, budget_s: float | None, save: Callable[[TrainState | None, CountersT, str], None],
                 say: Callable[[str], None], saved_iteration: int | None = None, start: CountersT | None = None,
                 exit_process: Callable[[int], None] = os._exit) -> None:
        self.grace_s = grace_s
        self.budget_s = budget_s
        self._save = save
        self._say = say
        self._exit = exit_process
        self.lock = threading.Lock()
        """Held by the main thread while it saves or handles a stop, and by the watcher while it saves."""
        self.keeps_copies = False
        self.copy_s_max = 0.0
        self.slowest_save_s = 0.0
        # (host state or None, progress) of the last finished iteration
        self._copy: tuple[TrainState | None, CountersT | None] = (None, start)
        self._saved_iteration = saved_iteration  # the newest checkpoint's iteration
        self._iteration_started = time.monotonic()
        self._iteration_s = 0.0  # the last iteration's seconds, evaluation and save included
        self._session_started = time.monotonic()
        self._handled = False
        self._signum: int | None = None
        self._requested_at: float | None = None
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        self._previous_fd: int | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="rlfit-stop-grace", daemon=True)

    def start(self) -> None:
        """Routes SIGTERM/SIGINT to the watcher as they arrive (main thread only), then starts it."""
        self._previous_fd = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        self._thread.start()

    def stop(self) -> None:
        """Ends the watcher and restores the previous wake-up descriptor."""
        self._done.set()
        self._thread.join(timeout=5)
        if self._previous_fd is not None:
            signal.set_wakeup_fd(self._previous_fd)
        self._read.close()
        self._write.close()

    def iteration_started(self) -> None:
        self._iteration_started = time.monotonic()

    def iteration_ended(self, state: TrainState, progress: CountersT, saved: bool) -> None:
        """After an iteration (its evaluation and scheduled save done): from the second iteration on, keeps a host
        copy when iterations are longer than the grace allows. `progress`: the counters the save writes (its
        `iteration`, and `copy()`); `saved`: this iteration's checkpoint was written."""
        self._iteration_s = time.monotonic() - self._iteration_started
        if saved:
            self._saved_iteration = progress.iteration
        if not self.keeps_copies and self._iteration_s + reserve_s(self.grace_s, self.slowest_save_s) > self.grace_s:
            self.keeps_copies = True
            self._say(f"rlfit: an iteration takes {self._iteration_s:.0f}s, longer than run.stop_grace_s="
                      f"{self.grace_s:g}: keeping a host copy of each finished iteration, so that a stop saves within "
                      "the grace")
        if self.keeps_copies:
            started = time.monotonic()
            copy = host_copy(state)
            self.copy_s_max = max(self.copy_s_max, time.monotonic() - started)
            self._copy = (copy, progress.copy())
        else:  # no state, but the summary a save without one writes reports the last finished iteration's counters
            self._copy = (None, progress)

    def handled(self) -> None:
        """The main thread handles the stop itself (call with `lock` held): the watcher stands down."""
        self._handled = True

    def record(self) -> dict[str, float | bool]:
        """summary.json's `stop_grace`."""
        return {"grace_s": self.grace_s, "host_copies": self.keeps_copies, "copy_s_max": self.copy_s_max}

    def _watch(self) -> None:
        while not self._done.is_set():
            readable, _, _ = select.select([self._read], [], [], 0.2)
            if readable:
                self._heard(self._read.recv(64))
            deadline = self._deadline()
            if deadline is not None and time.monotonic() >= deadline and not self._handled:
                self._save_and_exit()
                return

    def _heard(self, data: bytes) -> None:
        for signum in data:
            if signum not in EXIT_CODES:
                continue
            if self._signum is not None:
                warn_line(f"rlfit: second {signal.Signals(signum).name}, exiting without saving")
                self._exit(EXIT_CODES[signum])
                return
            self._signum, self._requested_at = signum, time.monotonic()
            # One write: the main thread's signal handler says its own line at the same moment.
            warn_line(f"rlfit: {signal.Signals(signum).name} received; saving within {self.grace_s:g}s "
                      "(send it again to exit at once)")

    def _deadline(self) -> float | None:
        """When the watcher must save: where the running iteration would end too late for the grace (or the budget),
        at once; otherwise at the grace (budget) less the reserve, should the main thread not have handled it."""
        ends: list[float] = []
        if self._requested_at is not None:
            ends.append(self._requested_at + self.grace_s)
        if self.budget_s is not None:
            ends.append(self._session_started + self.budget_s)
        if not ends:
            return None
        latest = min(ends) - reserve_s(self.grace_s, self.slowest_save_s)
        expected_end = self._iteration_started + self._iteration_s
        if self._iteration_s > 0 and expected_end > latest and self._requested_at is not None:
            return time.monotonic()  # the iteration will not end in time: save now
        return latest

    def _save_and_exit(self) -> None:
        signum = self._signum
        reason = signal.Signals(signum).name if signum is not None else "time_budget"
        code = EXIT_CODES[signum] if signum is not None else 0
        if not self.lock.acquire(timeout=max(0.0, self.grace_s / 4)):
            return  # the main thread is saving: it handles the stop right after
        if self._handled:
            self.lock.release()
            return
        state, progress = self._copy
        newer = state is not None and progress is not None and progress.iteration != self._saved_iteration
        assert progress is not None, "the loop starts the watcher with its counters"
        with jax.default_device(jax.devices("cpu")[0]):
            self._save(state if newer else None, progress, reason)  # the checkpoint where newer, the summary
        where = (f"saved iteration {progress.iteration}, the last finished" if newer else
                 f"the newest checkpoint (iteration {self._saved_iteration}) is the last finished iteration")
        warn_line(f"rlfit: stopped by {reason} within run.stop_grace_s={self.grace_s:g}: {where}; the iteration "
                  "under way is lost")
        sys.stdout.flush()
        self._exit(code)
