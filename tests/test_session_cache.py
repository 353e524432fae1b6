"""tests/conftest.py's compile cache for the test session: the folder the session made goes when it ends; one named
by RLFIT_TEST_SESSION_CACHE stays (benchmarks/make_test_time.py reads it afterwards)."""

from __future__ import annotations

import tests.conftest as conftest


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
