"""A write the disk refuses (full, over quota, read-only) stops the command in one line with exit code 4.

The refusal reaches rlfit in several forms: an OSError from Python's own writes, and from Orbax the ValueError
or RuntimeError TensorStore raises for it (`RESOURCE_EXHAUSTED: Error writing ... No space left on device
[os_error_code='28']`), possibly as the cause of another error. `refusal` finds it in any of them;
`stop_on_refusal` turns it into `WriteFailed`, which the command line prints as one line (exit code 4).

A refused Orbax save leaves work behind in Orbax's threads and event loops, which then log the same failure
again (absl, asyncio) and report callbacks into loops already closed. `quiet_orbax_echoes` drops exactly those
echoes, so the one line stays the only one.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rlfit.errors import UserError
from rlfit.exit_codes import WRITE_FAILED

EXIT_WRITE_FAILED = WRITE_FAILED

REFUSED = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
"""The errors that mean the disk refuses the write, whatever is written: full, over quota, read-only."""

_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")


class WriteFailed(UserError):
    """A file could not be written (disk full, over quota, read-only); what was written before is intact.

    `what` says what failed and why, `fix` what to do once the disk takes writes again; a command that knows
    better how to go on (an experiment around a trial's run) gives the same `what` its own `fix`."""

    exit_code = EXIT_WRITE_FAILED

    def __init__(self, what: str, fix: str = ""):
        super().__init__(f"{what}; {fix}" if fix else what)
        self.what = what
        self.fix = fix


def refusal(error: BaseException) -> OSError | None:
    """The refused write behind `error` (itself, its cause or its context, and theirs), as an OSError
    with the refusal's errno; None when `error` is not a disk refusing a write."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        found = _own_refusal(current)
        if found is not None:
            return found
        pending += [current.__cause__, current.__context__]
    return None


def _own_refusal(error: BaseException) -> OSError | None:
    """`error` as a refusal when it is one itself (not counting its cause or context)."""
    if isinstance(error, OSError) and error.errno in REFUSED:
        return error
    if not isinstance(error, (ValueError, RuntimeError)):
        return None
    text = str(error)
    code = _OS_ERROR_CODE.search(text)
    if code is not None and int(code.group(1)) in REFUSED:
        number = int(code.group(1))
        return OSError(number, os.strerror(number))
    for number in REFUSED:
        if os.strerror(number) in text:
            return OSError(number, os.strerror(number))
    return None


def describe(refused: OSError) -> str:
    """What could not be written and why, e.g. 'cannot write run/summary.json: No space left on device'."""
    where = f" {refused.filename}" if refused.filename else ""
    return f"cannot write{where}: {refused.strerror or refused}"


@contextmanager
def naming(path: os.PathLike | str, *stand_ins: os.PathLike | str) -> Iterator[None]:
    """An OSError inside the block that names no file (os.write, a buffered file's flush), or one of `stand_ins`
    (the temporary file written in its place), names `path`."""
    try:
        yield
    except OSError as error:
        if error.filename is not None and str(error.filename) not in {str(p) for p in stand_ins}:
            raise
        raise OSError(error.errno, error.strerror, str(path)) from None


@contextmanager
def stop_on_refusal(fix: str) -> Iterator[None]:
    """Turns a refused write inside the block into WriteFailed (exit code 4) saying `fix`, also one already
    reported as WriteFailed (this `fix` replaces its own); other errors pass."""
    try:
        yield
    except WriteFailed as error:
        raise WriteFailed(error.what, fix) from None
    except Exception as error:  # noqa: BLE001 - only a refused write is turned into WriteFailed
        refused = refusal(error)
        if refused is None:
            raise
        raise WriteFailed(describe(refused), fix) from None


class _EchoFilter(logging.Filter):
    """Drops a log record that repeats a refused write (its message or its exception is one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exception = record.exc_info[1] if record.exc_info else None
        if exception is not None and (refusal(exception) is not None or _aftermath(str(exception))):
            return False
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format is left to logging
            return True
        return _own_refusal(RuntimeError(message)) is None and not _aftermath(message)


def _aftermath(message: str) -> bool:
    """Whether `message` is a write that failed only because a refused Orbax save was being cleaned up: another of
    its threads still writing into the temporary folder the failure removed (TensorStore's `NOT_FOUND: Error
    writing ...`)."""
    return (bool(_ORBAX_SAVES["running"] or _ORBAX_SAVES["refused"])
            and "NOT_FOUND: Error writing" in message)


_ORBAX_SAVES = {"running": 0, "refused": False}


def _drop_orbax_echo(unraisable) -> bool:
    """True for an error Python could not raise that a refused (or running) Orbax save left behind."""
    if not (_ORBAX_SAVES["running"] or _ORBAX_SAVES["refused"]):
        return False
    value = unraisable.exc_value
    if value is not None and refusal(value) is not None:
        return True
    if isinstance(value, RuntimeError) and str(value) == "Event loop is closed":
        return True  # TensorStore completing a write whose event loop Orbax closed when the save failed
    code = getattr(unraisable.object, "cr_code", None)
    return code is not None and f"{os.sep}orbax{os.sep}" in code.co_filename  # a coroutine abandoned mid-write


_installed: list[bool] = []


def _install_echo_filters() -> None:
    """Once per process: the log filter on absl's and asyncio's loggers and the hook for unraisable errors."""
    if _installed:
        return
    _installed.append(True)
    for name in ("absl", "asyncio"):
        logging.getLogger(name).addFilter(_EchoFilter())
    previous = sys.unraisablehook

    def hook(unraisable) -> None:
        if not _drop_orbax_echo(unraisable):
            previous(unraisable)

    sys.unraisablehook = hook


@contextmanager
def quiet_orbax_echoes() -> Iterator[None]:
    """Around an Orbax save: when the disk refuses it, what Orbax's threads and loops repeat of the failure
    (during the save or after it) is dropped; a refusal leaves the block as the OSError behind it."""
    _install_echo_filters()
    _ORBAX_SAVES["running"] += 1
    try:
        yield
    except Exception as error:  # noqa: BLE001 - only a refused write is translated
        refused = refusal(error)
        if refused is None:
            raise
        _ORBAX_SAVES["refused"] = True
        raise refused from None
    finally:
        _ORBAX_SAVES["running"] -= 1
