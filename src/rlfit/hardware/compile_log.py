"""What each program rlfit compiles costs, and whether JAX's persistent compile cache supplied it.

JAX reports a cache lookup as a `jax.monitoring` event (`/jax/compilation_cache/cache_hits` or `.../cache_misses`)
without naming the program. A program's own lookup is the last one of its compile: tracing it may run small
programs eagerly first (each with a lookup of its own), but the program itself is compiled last. So
`timed_compile` keeps the events of its block and reads the last. A lookup is reported in the thread that compiles,
so blocks open in other threads at the same time (programs compiled concurrently, `in_background`) do not see it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import NamedTuple, TypeVar

HIT, MISS = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"
STORE_HIT = "/rlfit/program_store/hit"
"""Recorded when a program comes from rlfit's store of traced programs (`rlfit.hardware.program_store`)."""
STORE_DISCARDED = "/rlfit/program_store/discarded"
"""Recorded when a program read from the store could not be lowered (its entry is removed) and was traced instead."""


class ProgramCompile(NamedTuple):
    """One compiled program, as `summary.json` records it."""

    name: str
    """What the program does ("training step", "evaluation")."""
    compile_s: float
    """Seconds spent lowering and compiling it (or reading it from the cache)."""
    from_cache: bool | None
    """True: read from the persistent cache; False: compiled (and written there if it took >= 0.5 s);
    None: no cache was consulted (no cache folder)."""
    from_store: bool = False
    """True: the traced program came from rlfit's program store (`rlfit.hardware.program_store`), so the code was
    neither traced nor lowered again."""

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


_LOCK = threading.Lock()
_OPEN: dict[int, list[list[str]]] = {}
"""Per thread, the event lists of its `timed_compile` blocks now open (each receives that thread's lookups)."""


def _listen(event: str, **_: object) -> None:
    if event in (HIT, MISS, STORE_HIT, STORE_DISCARDED):
        with _LOCK:
            for events in _OPEN.get(threading.get_ident(), ()):
                events.append(event)


@functools.cache
def _listening() -> None:
    import jax

    jax.monitoring.register_event_listener(_listen)


class _Timing:
    """The block's record, filled in when the block ends."""

    record: ProgramCompile | None = None


@contextlib.contextmanager
def timed_compile(name: str) -> Iterator[_Timing]:
    """Times the compile of the program `name` done inside the block; `.record` holds its ProgramCompile after."""
    _listening()
    events: list[str] = []
    timing = _Timing()
    thread = threading.get_ident()
    with _LOCK:
        _OPEN.setdefault(thread, []).append(events)
    started = time.perf_counter()
    try:
        yield timing
    finally:
        seconds = time.perf_counter() - started
        with _LOCK:
            _OPEN[thread].remove(events)
            if not _OPEN[thread]:
                del _OPEN[thread]
        lookups = [event for event in events if event in (HIT, MISS)]
        store = [event for event in events if event in (STORE_HIT, STORE_DISCARDED)]
        timing.record = ProgramCompile(name, seconds, (lookups[-1] == HIT) if lookups else None,
                                       bool(store) and store[-1] == STORE_HIT)


T = TypeVar("T")


_BACKGROUND: set[threading.Thread] = set()
"""Threads `in_background` started that may still be inside a compile."""


def compiling_in_background() -> bool:
    """Whether a thread `in_background` started is still running (inside XLA's compile, say)."""
    return any(thread.is_alive() for thread in tuple(_BACKGROUND))


def wait_for_background_compiles() -> None:
    """Waits until every thread `in_background` started has finished. Registered with `atexit`: a daemon thread
    still inside XLA's C++ compile when the interpreter finalizes is torn down mid-frame, which aborts the process
    ("terminate called ... FATAL: exception not rethrown", exit -6). The command line does not wait: it leaves
    with `os._exit` instead (`rlfit.cli.run`)."""
    for thread in tuple(_BACKGROUND):
        thread.join()


atexit.register(wait_for_background_compiles)


def in_background(work: Callable[[], T], name: str = "rlfit-compile") -> Future[T]:
    """`work()` started in a thread of its own; its future (the result, or the exception it raised).

    For compiles: tracing holds Python's lock, but XLA's compile releases it, so a program compiles while the
    caller builds the training state, runs an iteration or compiles another. A process that ends while one is
    still compiling (a run stopped by a signal before its first evaluation, an error) must not let the interpreter
    tear the thread down: the command line leaves with `os._exit` (`rlfit.cli.run`), and a Python process waits
    for it at exit (`wait_for_background_compiles`).
    """
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(work())
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(error)
        finally:
            _BACKGROUND.discard(threading.current_thread())

    thread = threading.Thread(target=run, name=name, daemon=True)
    _BACKGROUND.add(thread)
    thread.start()
    return future


def seconds_since_process_start() -> float:
    """Wall-clock seconds since this process started (the interpreter's start, imports included): from the
    kernel's record of the process where one can be read, else since rlfit was imported."""
    try:
        import psutil

        return max(0.0, time.time() - psutil.Process(os.getpid()).create_time())
    except Exception:  # noqa: BLE001 - psutil is optional; any failure falls back to the import time
        return time.time() - _IMPORTED_AT


def time_to_first_step(session_started: float) -> float:
    """Seconds to now (the end of a session's first training step): since the process started for the process's
    first session to step, since `session_started` (a `time.perf_counter()` reading) for a later session in the
    same process (an experiment's next trial)."""
    with _LOCK:
        first = not _FIRST_STEP_TAKEN
        _FIRST_STEP_TAKEN.append(True)
    return seconds_since_process_start() if first else time.perf_counter() - session_started


_IMPORTED_AT = time.time()
_FIRST_STEP_TAKEN: list[bool] = []
"""Not empty once a session of this process has taken its first training step."""
