"""What each program rlfit compiles costs, and whether JAX's persistent compile cache supplied it.

JAX reports a cache lookup as a `jax.monitoring` event (`/jax/compilation_cache/cache_hits` or `.../cache_misses`)
without naming the program. A program's own lookup is the last one of its compile: tracing it may run small
programs eagerly first (each with a lookup of its own), but the program itself is compiled last. So
`timed_compile` keeps the events of its block and reads the last.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

HIT, MISS = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"


class ProgramCompile(NamedTuple):
    """One compiled program, as `summary.json` records it."""

    name: str
    """What the program does ("training step", "evaluation")."""
    compile_s: float
    """Seconds spent lowering and compiling it (or reading it from the cache)."""
    from_cache: bool | None
    """True: read from the persistent cache; False: compiled (and written there if it took >= 0.5 s);
    None: no cache was consulted (no cache folder)."""

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


_LOCK = threading.Lock()
_OPEN: list[list[str]] = []
"""The event lists of the `timed_compile` blocks now open (each receives every lookup event)."""


def _listen(event: str, **_: object) -> None:
    if event in (HIT, MISS):
        with _LOCK:
            for events in _OPEN:
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
    with _LOCK:
        _OPEN.append(events)
    started = time.perf_counter()
    try:
        yield timing
    finally:
        seconds = time.perf_counter() - started
        with _LOCK:
            _OPEN.remove(events)
        timing.record = ProgramCompile(name, seconds, (events[-1] == HIT) if events else None)


def seconds_since_process_start() -> float:
    """Wall-clock seconds since this process started (the interpreter's start, imports included): from the
    kernel's record of the process where one can be read, else since rlfit was imported."""
    try:
        import psutil

        return max(0.0, time.time() - psutil.Process(os.getpid()).create_time())
    except Exception:  # noqa: BLE001 - psutil is optional; any failure falls back to the import time
        return time.time() - _IMPORTED_AT


_IMPORTED_AT = time.time()
