"""benchmarks/make_test_time.py's reading of pytest's JUnit XML: each test case's file, its seconds summed per file
against sums written out by hand, the outcomes counted; and its refusal of a clone folder already in use."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.parallel.test_mesh" name="test_ppo[2]" time="208.5" />
<testcase classname="tests.parallel.test_mesh" name="test_sac" time="1.5" />
<testcase classname="tests.run.test_x.TestGroup" name="test_in_a_class" time="3.0"><skipped message="no" /></testcase>
<testcase classname="tests.run.test_y" name="test_fails" time="2.25"><failure message="assert 0" /></testcase>
<testcase classname="tests.run.test_y" name="test_errs" time="0.75"><error message="fixture" /></testcase>
</testsuite></testsuites>
"""


@pytest.fixture
def module(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports its neighbour common.py
    return importlib.import_module("make_test_time")


@pytest.fixture
def checkout(tmp_path) -> Path:
    for name in ("tests/parallel/test_mesh.py", "tests/run/test_x.py", "tests/run/test_y.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "junit.xml").write_text(JUNIT)
    return tmp_path


def test_each_case_is_read_with_its_file_seconds_and_outcome(module, checkout):
    cases = module.read_junit(checkout / "junit.xml", checkout)
    assert [(c.file, c.name, c.seconds, c.outcome) for c in cases] == [
        ("tests/parallel/test_mesh.py", "test_ppo[2]", 208.5, "passed"),
        ("tests/parallel/test_mesh.py", "test_sac", 1.5, "passed"),
        ("tests/run/test_x.py", "test_in_a_class", 3.0, "skipped"),  # the class name is not a file
        ("tests/run/test_y.py", "test_fails", 2.25, "failed"),
        ("tests/run/test_y.py", "test_errs", 0.75, "error")]


def test_seconds_are_summed_per_file_and_the_slowest_come_first(module, checkout):
    summary = module.summarize(module.read_junit(checkout / "junit.xml", checkout))
    assert summary["slowest_files"] == [{"file": "tests/parallel/test_mesh.py", "seconds": 210.0},
                                        {"file": "tests/run/test_x.py", "seconds": 3.0},
                                        {"file": "tests/run/test_y.py", "seconds": 3.0}]
    assert summary["slowest_tests"][0] == {"test": "tests/parallel/test_mesh.py::test_ppo[2]", "seconds": 208.5}
    assert summary["counts"] == {"passed": 2, "skipped": 1, "failed": 1, "error": 1}
    assert summary["tests"] == 5 and summary["files"] == 3 and summary["test_seconds"] == 216.0


def test_a_clone_folder_in_use_is_refused_in_one_line(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    done = subprocess.run([sys.executable, str(BENCHMARKS / "make_test_time.py"), "--clone", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"make_test_time.py: error: --clone {tmp_path} exists and is not empty; name a new folder"]
    assert (tmp_path / "keep.txt").read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_the_compile_seconds_jax_kept_are_summed_per_program_name(module, tmp_path):
    """Entries written as JAX's persistent cache writes them (its own functions: seconds, then the executable,
    compressed), in the cache's subfolders; a file of another kind is not read."""
    from jax._src import compilation_cache

    written = {"jax/jit_evaluate-aa11-cache": 81, "jax/jit_train_iteration-bb22-cache": 50,
               "jax/jit_train_iteration-cc33-cache": 3, "jit_step-dd44-cache": 0}
    for name, seconds in written.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        entry = compilation_cache.combine_executable_and_time(b"not an executable", seconds)
        (tmp_path / name).write_bytes(compilation_cache.compress_executable(entry))
    (tmp_path / "programs").mkdir()
    (tmp_path / "programs" / "ab12.jaxprog").write_bytes(b"rlfit's program store, not XLA's")
    compiles = module.cached_compiles(tmp_path)
    assert compiles["xla_compile_s"] == 134 and compiles["programs"] == 4
    assert compiles["by_name"] == [{"name": "jit_evaluate", "programs": 1, "seconds": 81},
                                   {"name": "jit_train_iteration", "programs": 2, "seconds": 53},
                                   {"name": "jit_step", "programs": 1, "seconds": 0}]
    assert [(row["name"], row["seconds"]) for row in compiles["largest"]] == [
        ("jit_evaluate", 81), ("jit_train_iteration", 50), ("jit_train_iteration", 3), ("jit_step", 0)]


def test_compiles_of_a_folder_that_is_not_there_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "make_test_time.py"), "--compiles-of",
                           str(tmp_path / "gone")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"make_test_time.py: error: --compiles-of {tmp_path / 'gone'} is not a folder; name a test session's compile "
        "cache (RLFIT_TEST_SESSION_CACHE)"]
