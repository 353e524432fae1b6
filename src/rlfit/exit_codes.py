"""Every exit code an `rlfit` command ends with, one meaning each, the same for every command.

The one place they are defined: the errors that carry a code (`UserError.exit_code`, `WriteFailed`, `OutOfMemory`,
`NonFiniteError`, `StopRequested`) and the commands that return one read them from here, and the table of
docs/guarantees.md ("Exit codes") is checked against them by tests/test_exit_codes.py.
"""

from __future__ import annotations

DONE = 0
"""The command did what it was asked (also a run stopped by a stopping rule)."""
CHECK_FAILED = 1
"""`rlfit doctor --full`: a check failed."""
BAD_INPUT = 2
"""Bad input: one line naming the problem and the fix; nothing written or overwritten."""
NON_FINITE = 3
"""Training became non-finite (the NaN guard); the state was not saved."""
WRITE_FAILED = 4
"""A file could not be written (disk full, over quota, read-only); what was written before is kept."""
OUT_OF_MEMORY = 5
"""Out of device memory with no smaller configuration to back off to (or `run.oom_backoff: false`)."""
TRIALS_FAILED = 6
"""`rlfit experiment`: at least one trial failed (non-finite or out of memory); the report left it out."""
INTERRUPTED = 130
"""Stopped by SIGINT (Ctrl-C) after saving a checkpoint (128 + 2)."""
BROKEN_PIPE = 141
"""The reader of the output went away (`rlfit envs | head`): ended quietly (128 + SIGPIPE)."""
TERMINATED = 143
"""Stopped by SIGTERM after saving a checkpoint (128 + 15)."""


def exit_codes() -> dict[str, int]:
    """Name -> code, for every code above, in the order they are defined."""
    return {name: value for name, value in globals().items() if name.isupper() and isinstance(value, int)}
