"""How long `make test` takes in a fresh clone, and where its time goes (issue 48, item 6: under 15 minutes on the
2-core machine).

    .venv/bin/python benchmarks/make_test_time.py                   # git clone . into a temporary folder, make test there
    .venv/bin/python benchmarks/make_test_time.py --clone /tmp/ci/fresh   # the clone stays there (make quickstart after)
    .venv/bin/python benchmarks/make_test_time.py --quick           # checks the script: one small test file, this checkout

The clone is of the committed HEAD, laid out as CI lays its clone: with this checkout's `../shared` beside it (a
link), so the tests that read the offline G1 assets run as they do in CI. `--clone DIR` keeps the clone in DIR and
links `../shared` beside it where DIR's parent has none; `--without-shared` times a clone without it (the G1 tests
skip, as on a machine without the assets). `make test` runs as CI runs it, its virtual environment's install
included, with pytest's JUnit XML asked for through `PYTEST_ADDOPTS`, and without this shell's PYTHONPATH,
VIRTUAL_ENV and RLFIT_* variables.
Records the wall and CPU seconds of the whole command (user + system of every process it started: the CPU's share
is `cpu_s / (wall_s x nproc)`), pytest's own line, and per test file the seconds of its tests (setup, call and
teardown summed: a module's shared fixture counts in the file that builds it), the slowest files and tests. With
two pytest workers, the files' seconds add up to about twice pytest's wall time. Writes
results/make_test_time.json (`--quick`: results/tmp/make_test_time_quick.json).

Where the XLA compiles go: the test session's compile cache (`RLFIT_TEST_SESSION_CACHE`, here a folder of this
script's) keeps, beside each program it compiled, the seconds XLA took (JAX writes them whole, truncated); the record
sums them per program name (`compiles`). Programs that call back into Python (native MuJoCo in play, sim2sim and
transfer-check) are never cached, and tracing and lowering are not in these seconds.

    .venv/bin/python benchmarks/make_test_time.py --compiles-of /tmp/rlfit-test-session-cache-XXXX   # an old session's
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, TMP, finish_record, print_table, run_timed, start_record  # noqa: E402

GOAL_MINUTES = 15.0
"""Issue 48's goal for `make test` in a fresh clone on 2 cores."""
QUICK_TESTS = ("tests/rundir/test_records.py",)
"""What `--quick` runs: a small file of pure-Python tests, enough to write and read a JUnit report."""
SLOWEST = 25
"""How many files and tests the record lists, slowest first."""
CACHE_ENTRY_SUFFIX = "-cache"
"""How JAX names a compiled program's file in its persistent cache: `<module name>-<key>-cache`."""


class Case(NamedTuple):
    """One test's row of the JUnit report."""

    file: str
    name: str
    seconds: float
    outcome: str
    """passed, failed, error or skipped."""


def read_junit(report: Path, root: Path) -> list[Case]:
    """The test cases of pytest's JUnit XML, each with the test file it came from (relative to `root`)."""
    cases = []
    for element in ElementTree.parse(report).iter("testcase"):
        outcome = next((child.tag for child in element if child.tag in ("failure", "error", "skipped")), "passed")
        cases.append(Case(file_of(element.get("classname", ""), root), element.get("name", ""),
                          float(element.get("time") or 0.0), {"failure": "failed"}.get(outcome, outcome)))
    return cases


def file_of(classname: str, root: Path) -> str:
    """`tests.parallel.test_mesh` or `tests.run.test_x.TestClass` -> the file path under `root` that holds it."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = Path(*parts[:end]).with_suffix(".py")
        if (root / candidate).is_file():
            return candidate.as_posix()
    return classname


def summarize(cases: list[Case]) -> dict:
    """Counts by outcome, seconds per file (slowest first), the slowest files and tests."""
    per_file: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for case in cases:
        per_file[case.file] += case.seconds
        counts[case.outcome] += 1
    files = sorted(per_file.items(), key=lambda item: -item[1])
    tests = sorted(cases, key=lambda case: -case.seconds)
    return {"counts": dict(counts), "tests": len(cases), "test_seconds": round(sum(per_file.values()), 1),
            "files": len(files), "slowest_files": [{"file": f, "seconds": round(s, 1)} for f, s in files[:SLOWEST]],
            "slowest_tests": [{"test": f"{c.file}::{c.name}", "seconds": round(c.seconds, 1)}
                              for c in tests[:SLOWEST]]}


def cached_compiles(folder: Path) -> dict:
    """The XLA compile seconds JAX recorded in the compile cache `folder` (entries in any subfolder): their sum,
    the number of programs, and per program name (the jitted function's: `jit_evaluate`...) its count and seconds,
    most first; the largest single programs with the time (UTC) each was written."""
    from datetime import datetime, timezone

    from jax._src import compilation_cache

    rows = []
    for path in sorted(folder.rglob(f"*{CACHE_ENTRY_SUFFIX}")):
        entry = compilation_cache.decompress_executable(path.read_bytes())
        _, seconds = compilation_cache.extract_executable_and_time(entry)
        written = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%H:%M:%S")
        rows.append((seconds, path.name.rsplit("-", 2)[0], written))
    per_name: dict[str, list[int]] = defaultdict(list)
    for seconds, name, _ in rows:
        per_name[name].append(seconds)
    names = sorted(per_name.items(), key=lambda item: (-sum(item[1]), item[0]))
    return {"xla_compile_s": sum(seconds for seconds, _, _ in rows), "programs": len(rows),
            "by_name": [{"name": name, "programs": len(times), "seconds": sum(times)} for name, times in names],
            "largest": [{"name": name, "seconds": seconds, "written_utc": written}
                        for seconds, name, written in sorted(rows, key=lambda row: -row[0])[:SLOWEST]]}


def print_compiles(compiles: dict) -> None:
    """`cached_compiles`' total and its 15 costliest program names as a table."""
    print(f"\nXLA compiles kept in the session's cache: {compiles['programs']} programs, "
          f"{compiles['xla_compile_s']} s (whole seconds each)")
    print_table([(row["name"], row["programs"], row["seconds"]) for row in compiles["by_name"][:15]],
                ["program", "count", "seconds"])


def clone(target: Path) -> None:
    """`git clone` of this repository's HEAD into `target` (which must not exist yet, or be empty)."""
    done = subprocess.run(["git", "clone", "-q", str(REPO), str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"make_test_time.py: error: git clone into {target} failed: {done.stderr.strip()}")


def lay_shared_beside(root: Path) -> None:
    """A link to this checkout's `../shared` beside the clone at `root`, as CI lays a copy of shared/ beside its clone
    (nothing where the clone's parent has one already, or this checkout has none)."""
    beside, ours = root.parent / "shared", (REPO.parent / "shared").resolve()
    if not beside.exists() and ours.is_dir():
        beside.symlink_to(ours, target_is_directory=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clone", type=Path, help="clone into this folder and keep it (it must not exist yet)")
    parser.add_argument("--quick", action="store_true", help=f"pytest on {', '.join(QUICK_TESTS)} in this checkout")
    parser.add_argument("--out", type=Path, help="the JSON (default results/make_test_time.json)")
    parser.add_argument("--without-shared", action="store_true",
                        help="no ../shared beside the clone (CI has one: the G1 tests then skip)")
    parser.add_argument("--compiles-of", type=Path, metavar="CACHE",
                        help="print where an earlier test session's XLA compiles went (its compile cache) and stop")
    args = parser.parse_args()
    if args.compiles_of is not None:
        if not args.compiles_of.is_dir():
            print(f"make_test_time.py: error: --compiles-of {args.compiles_of} is not a folder; name a test session's "
                  "compile cache (RLFIT_TEST_SESSION_CACHE)", file=sys.stderr)
            return 2
        print_compiles(cached_compiles(args.compiles_of))
        return 0
    if args.clone is not None and args.clone.exists() and any(args.clone.iterdir()):
        print(f"make_test_time.py: error: --clone {args.clone} exists and is not empty; name a new folder",
              file=sys.stderr)
        return 2
    if args.clone is not None and args.without_shared and (args.clone.resolve().parent / "shared").exists():
        print(f"make_test_time.py: error: --without-shared, but {args.clone.resolve().parent / 'shared'} is beside "
              "--clone; name a folder whose parent has no shared/", file=sys.stderr)
        return 2

    record = start_record("make_test_time_quick" if args.quick else "make_test_time")
    scratch = Path(tempfile.mkdtemp(prefix="make-test-time-"))
    report = scratch / "junit.xml"
    env = {**os.environ, "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} --junitxml={report}".strip()}
    for name in [n for n in env if n in ("VIRTUAL_ENV", "PYTHONPATH") or n.startswith("RLFIT_")]:
        env.pop(name)  # as on a clean machine: no other checkout's sources, no user cache or assets
    session_cache = scratch / "session-cache"  # the test session's compile cache, read after it (`compiles`)
    session_cache.mkdir()
    env["RLFIT_TEST_SESSION_CACHE"] = str(session_cache)
    if args.quick:
        root = REPO
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *QUICK_TESTS]
        log = TMP / "make_test_time_quick.log"
    else:
        root = (args.clone or scratch / "clone").resolve()
        clone(root)
        if not args.without_shared:
            lay_shared_beside(root)
        argv = ["make", "-C", str(root), "test"]
        log = TMP / "make_test_time.log"
        record["clone"] = str(root)
        record["shared_beside_clone"] = (root.parent / "shared").is_dir()
    print(f"running {' '.join(argv)} (log: {log})", flush=True)
    timed = run_timed(argv, env=env, log=log)
    record["make_test" if not args.quick else "pytest"] = {
        **timed, "argv": argv, "minutes": round(timed["wall_s"] / 60, 2),
        "cpu_share": round(timed["cpu_s"] / (timed["wall_s"] * (os.cpu_count() or 1)), 2)}
    record["goal_minutes"] = GOAL_MINUTES
    tail = log.read_text(errors="replace").splitlines()
    record["pytest_line"] = next((line.strip() for line in reversed(tail) if " in " in line and "passed" in line), None)
    record["log_tail"] = tail[-40:] if timed["exit_code"] != 0 else []
    if report.exists():
        record.update(summarize(read_junit(report, root)))
    record["compiles"] = cached_compiles(session_cache)
    finish_record(record, args.out)

    print(f"\n{' '.join(argv)}: exit {timed['exit_code']}, {timed['wall_s'] / 60:.1f} min wall "
          f"(goal {GOAL_MINUTES:g}), {timed['cpu_s'] / 60:.1f} min CPU; {record['pytest_line']}")
    if report.exists():
        print_table([(f["file"], f["seconds"]) for f in record["slowest_files"][:15]], ["test file", "seconds"])
    print_compiles(record["compiles"])
    if args.clone is None and not args.quick:
        shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    return timed["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
