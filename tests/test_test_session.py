"""tests/conftest.py's set-up of the test session: its compile cache (the folder the session made goes when it ends;
one named by RLFIT_TEST_SESSION_CACHE stays, for benchmarks/make_test_time.py to read) and its garbage collector
(rlfit's thresholds, and what collecting imported frozen out of the collector's walks)."""

from __future__ import annotations

import gc

import tests.conftest as conftest
from rlfit.cli.gc_thresholds import YOUNG_THRESHOLD


def test_the_folder_the_session_made_is_removed_and_a_named_one_kept(tmp_path, monkeypatch):
    folder = tmp_path / "session-cache"
    (folder / "jax").mkdir(parents=True)
    (folder / "jax" / "jit_step-0-cache").write_bytes(b"program")
    monkeypatch.setattr(conftest, "SESSION_CACHE", str(folder))
    monkeypatch.setattr(conftest, "MADE_SESSION_CACHE", False)  # named by RLFIT_TEST_SESSION_CACHE
    conftest.pytest_unconfigure(None)
    assert (folder / "jax" / "jit_step-0-cache").read_bytes() == b"program"
    monkeypatch.setattr(conftest, "MADE_SESSION_CACHE", True)
    conftest.pytest_unconfigure(None)
    assert not folder.exists()


def test_the_tests_run_at_rlfits_thresholds_with_what_collecting_imported_frozen():
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_freeze_count() > 10_000  # pytest's, rlfit's and the test modules' objects
