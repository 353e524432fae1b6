"""rlfit.rundir.write_failures: which errors are a disk refusing a write (errno, or the text Orbax/TensorStore give it),
and that a refusal becomes WriteFailed (exit code 4) while every other error passes unchanged."""

from __future__ import annotations

import errno
import logging
import os

import pytest

from rlfit.errors import UserError
from rlfit.rundir.write_failures import WriteFailed, naming, quiet_orbax_echoes, refusal, stop_on_refusal

# What TensorStore raised (through Orbax) when a tmpfs filled up during a checkpoint, as seen in a real run.
ORBAX_FULL = ('RESOURCE_EXHAUSTED: Error writing "leaves.000030/0.0" in OCDBT database at local file '
              '"/mnt/x/run/checkpoints/.tmp-00000001/state.orbax-checkpoint-tmp/ocdbt.process_0/": Failed writing: '
              '"/mnt/x/run/checkpoints/.tmp-00000001/state.orbax-checkpoint-tmp/ocdbt.process_0/d/62b3": Failed to '
              "write 1830 bytes to file 20: No space left on device [os_error_code='28']")
XLA_OUT_OF_MEMORY = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes."


@pytest.mark.parametrize("number", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
def test_an_os_error_refusing_the_write_is_a_refusal(number):
    error = OSError(number, os.strerror(number), "/runs/a/metrics.jsonl")
    assert refusal(error) is error


@pytest.mark.parametrize("error", [OSError(errno.EACCES, "Permission denied"), OSError(errno.ENOENT, "gone"),
                                   RuntimeError(XLA_OUT_OF_MEMORY), ValueError("bad value"), KeyError("x")])
def test_other_errors_are_not_refusals(error):
    assert refusal(error) is None


def test_orbax_wrappers_carry_the_errno_they_name():
    full = refusal(ValueError(ORBAX_FULL))
    assert full.errno == errno.ENOSPC and full.strerror == os.strerror(errno.ENOSPC)
    quota = refusal(RuntimeError("Failed writing: Disk quota exceeded [os_error_code=122]"))
    assert quota.errno == errno.EDQUOT
    read_only = refusal(ValueError(f"Error opening file: {os.strerror(errno.EROFS)}"))
    assert read_only.errno == errno.EROFS


def test_a_refusal_is_found_behind_another_error():
    try:
        try:
            raise ValueError(ORBAX_FULL)
        except ValueError as inner:
            raise RuntimeError("save failed") from inner
    except RuntimeError as outer:
        assert refusal(outer).errno == errno.ENOSPC
    while_handling = KeyError("raised while handling the refusal")
    while_handling.__context__ = OSError(errno.EDQUOT, "Disk quota exceeded")
    assert refusal(while_handling).errno == errno.EDQUOT


def test_stop_on_refusal_is_exit_4_naming_the_file_and_the_fix():
    with pytest.raises(WriteFailed) as caught:
        with stop_on_refusal("free space, then run it again"):
            raise OSError(errno.ENOSPC, "No space left on device", "/runs/a/summary.json")
    assert caught.value.exit_code == 4 and isinstance(caught.value, UserError)
    assert str(caught.value) == ("cannot write /runs/a/summary.json: No space left on device; "
                                 "free space, then run it again")


def test_stop_on_refusal_gives_an_inner_write_failure_its_own_fix():
    with pytest.raises(WriteFailed, match=r"^cannot write x: full; `rlfit experiment resume E`$"):
        with stop_on_refusal("`rlfit experiment resume E`"):
            raise WriteFailed("cannot write x: full", "`rlfit resume x`")


def test_stop_on_refusal_lets_other_errors_through():
    with pytest.raises(PermissionError):
        with stop_on_refusal("fix"):
            raise PermissionError(errno.EACCES, "Permission denied")
    with pytest.raises(RuntimeError, match="Out of memory"):
        with stop_on_refusal("fix"):
            raise RuntimeError(XLA_OUT_OF_MEMORY)


def test_naming_puts_the_path_on_an_error_that_names_none():
    with pytest.raises(OSError) as caught:
        with naming("/runs/a/metrics.jsonl"):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert caught.value.filename == "/runs/a/metrics.jsonl" and caught.value.errno == errno.ENOSPC


def test_naming_puts_the_path_in_place_of_a_temporary_stand_in():
    with pytest.raises(OSError) as caught:
        with naming("/runs/a/report.md", "/runs/a/.report.md.tmp"):
            raise OSError(errno.ENOSPC, "No space left on device", "/runs/a/.report.md.tmp")
    assert caught.value.filename == "/runs/a/report.md"
    with pytest.raises(OSError) as caught:
        with naming("/runs/a/report.md", "/runs/a/.report.md.tmp"):
            raise OSError(errno.ENOENT, "No such file or directory", "/runs/a/trial/summary.json")
    assert caught.value.filename == "/runs/a/trial/summary.json"  # another file's error keeps its name


def test_a_refused_orbax_save_leaves_as_its_os_error_and_its_echoes_are_dropped(caplog):
    with pytest.raises(OSError) as caught:
        with quiet_orbax_echoes():
            logging.getLogger("absl").error("_SignalingThread.run() raised an exception: %s", ORBAX_FULL)
            logging.getLogger("absl").error("an unrelated failure")
            raise ValueError(ORBAX_FULL)
    assert caught.value.errno == errno.ENOSPC
    assert [record.getMessage() for record in caplog.records] == ["an unrelated failure"]


def test_other_orbax_errors_pass_unchanged():
    with pytest.raises(ValueError, match="bad tree"):
        with quiet_orbax_echoes():
            raise ValueError("bad tree")


def test_what_a_refused_orbax_save_leaves_behind_is_not_reported(monkeypatch):
    """TensorStore completes writes into the event loops Orbax closed when the save failed: Python reports each
    as an unraisable 'Event loop is closed', which is dropped; other unraisable errors still reach the hook."""
    import sys
    from types import SimpleNamespace

    import rlfit.rundir.write_failures as write_failures

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    monkeypatch.setattr(write_failures, "_installed", [])
    monkeypatch.setattr(write_failures, "_ORBAX_SAVES", {"running": 0, "refused": False})
    closed = SimpleNamespace(exc_value=RuntimeError("Event loop is closed"), object=None)
    other = SimpleNamespace(exc_value=RuntimeError("a bug elsewhere"), object=None)
    with pytest.raises(OSError):
        with quiet_orbax_echoes():
            raise ValueError(ORBAX_FULL)
    sys.unraisablehook(closed)
    sys.unraisablehook(other)
    assert reported == [other]
