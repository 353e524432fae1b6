"""Stopping on SIGTERM / SIGINT: save, exit 143 / 130 (within `run.stop_grace_s`: `rlfit.run.stop_grace`); a second
signal exits at once."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

from rlfit.console import warn_line
from rlfit.exit_codes import INTERRUPTED, TERMINATED

EXIT_CODES: dict[int, int] = {signal.SIGTERM: TERMINATED, signal.SIGINT: INTERRUPTED}
SIGNAL_NAMES = {signal.Signals(signum).name: code for signum, code in EXIT_CODES.items()}
"""A run stopped by a signal records its name ('SIGTERM', 'SIGINT') as `stopped_by`; its exit code."""

Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
"""What `signal.signal` installs and returns: a function, SIG_DFL or SIG_IGN, or None (one not installed from Python)."""


class StopRequested(Exception):
    """Raised once a run stopped by a signal has saved and written its files (`raise_if_signalled`)."""

    def __init__(self, exit_code: int, signal_name: str):
        super().__init__(f"stopped by {signal_name} after saving a checkpoint")
        self.exit_code = exit_code


class StopFlag:
    """Installs handlers for SIGTERM and SIGINT for the duration of a `with` block."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Handler] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> StopFlag:
        for signum in EXIT_CODES:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # second signal: leave now
            warn_line(f"rlfit: second {signal.Signals(signum).name}, exiting without saving")
            os._exit(EXIT_CODES[signum])
        self.signum = signum
        # One write: the stop-grace watcher may announce the stop at the same moment.
        warn_line(f"rlfit: {signal.Signals(signum).name} received; finishing this iteration and saving "
                  "(send it again to exit at once)")

    @property
    def signal_name(self) -> str | None:
        """'SIGTERM' or 'SIGINT' once a stop was requested, else None."""
        return signal.Signals(self.signum).name if self.signum is not None else None


def raise_if_signalled(stopped_by: str | None) -> None:
    """Raises StopRequested (the signal's exit code) when a run's `stopped_by` names a signal; the caller of a
    host loop does this once the loop has returned and the run's files are closed."""
    if stopped_by in SIGNAL_NAMES:
        raise StopRequested(SIGNAL_NAMES[stopped_by], stopped_by)
