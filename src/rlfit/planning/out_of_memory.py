"""Out of device memory: recognise XLA's out-of-memory error (`is_out_of_memory`), and the error and one line a run
ends with where it cannot back off (`OutOfMemory`, `out_of_memory_message`).

The back-off itself is the runner's (`rlfit.run.recover`): it catches an error from creating the state, compiling
or running an iteration; when `is_out_of_memory` says so it asks the algorithm (`Algorithm.smaller_sizes`) for the
next configuration, rebuilds, and continues from the current training state.
"""

from __future__ import annotations

from rlfit.errors import UserError
from rlfit.exit_codes import OUT_OF_MEMORY

OUT_OF_MEMORY_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory allocating", "Out of memory while trying to allocate")
"""Text in the message of JAX's `JaxRuntimeError` (formerly `XlaRuntimeError`) when an XLA allocation fails:
the status code, e.g. 'RESOURCE_EXHAUSTED: Out of memory allocating 6400000000 bytes.', or XLA's own wording,
which the CPU runtime may wrap in another status ('INTERNAL: Error dispatching computation: Out of memory
allocating 4294967296 bytes.'). Case-sensitive, so PyTorch's 'CUDA out of memory' does not match."""


EXIT_OUT_OF_MEMORY = OUT_OF_MEMORY


class OutOfMemory(UserError):
    """Device memory ran out and no back-off was possible or allowed (exit code 5)."""

    exit_code = EXIT_OUT_OF_MEMORY


def out_of_memory_message(algo: str, num_envs: int, backoff_allowed: bool) -> str:
    """One line: where memory ran out and what to change."""
    if backoff_allowed:
        return (f"out of device memory even at {algo}.num_envs={num_envs}; use smaller networks or a device "
                "with more memory")
    return (f"out of device memory at {algo}.num_envs={num_envs} (run.oom_backoff=false); lower {algo}.num_envs, "
            "use --num-envs auto, or set run.oom_backoff=true")


def is_out_of_memory(error: BaseException) -> bool:
    """True when `error`, or an error it was raised from, is XLA running out of device memory.

    Matches JAX's runtime error (a RuntimeError) carrying the RESOURCE_EXHAUSTED status or XLA's
    out-of-memory wording, from compilation or execution. Python's own MemoryError (a host allocation) and
    other frameworks' wording are not matched.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RuntimeError) and any(marker in str(current) for marker in OUT_OF_MEMORY_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False

