"""Shared helpers for the benchmark scripts: machine context, JSON output, tables, timed subprocesses."""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS = BENCH_DIR / "results"
TMP = RESULTS / "tmp"
RLFIT = REPO / ".venv" / "bin" / "rlfit"
TOY_ENV = "tests.toy_env:make"
"""tests/toy_env.py's point-reaching environment: what the quick checks train on, since its programs compile in a
second or two where a Playground environment's take tens of seconds (`toy_env_importable` makes it importable)."""


def toy_env_importable() -> None:
    """Puts the repository root first on this process's `sys.path` and on `PYTHONPATH` (which the processes it
    starts inherit), so that `TOY_ENV` imports from a script run as `python benchmarks/NAME.py`."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *paths])


def load_1min() -> float:
    """The 1-minute load average (other processes on the machine slow every timing)."""
    return round(os.getloadavg()[0], 2)


def machine() -> dict[str, Any]:
    """What the numbers were measured on: CPU count, load now, Python, platform, date."""
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "git": git_state(),
    }


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (the same deterministic run can end differently on another CPU's
    floating point), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_state() -> dict[str, Any]:
    """The commit measured and whether src/ had uncommitted changes (others edit the checkout too)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    changed = git("status", "--porcelain", "--", "src").splitlines()
    return {"head": git("rev-parse", "HEAD"), "src_uncommitted_files": len(changed)}


def command_line() -> str:
    """The exact command that produced this result, as typed from the repository root."""
    script = os.path.relpath(sys.argv[0], REPO)
    return shlex.join([".venv/bin/python", script, *sys.argv[1:]])


def start_record(name: str) -> dict[str, Any]:
    """A result record with the context every JSON carries; `finish_record` adds the end load."""
    return {"benchmark": name, "command": command_line(), **machine(), "loadavg_1min_start": load_1min()}


def finish_record(record: dict[str, Any], out: Path | None = None) -> Path:
    """Adds the end load average and writes `record` to `out`.

    Default: results/<name>.json; --quick checks (<name> ending in _quick) go to results/tmp/, not committed.
    """
    record["loadavg_1min_end"] = load_1min()
    name = record["benchmark"]
    out = out or (TMP if name.endswith("_quick") else RESULTS) / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
    print(f"\nwrote {os.path.relpath(out, REPO)}")
    if out.resolve().is_relative_to(RESULTS.resolve()) and not out.resolve().is_relative_to(TMP.resolve()):
        refresh_figures()
    return out


def refresh_figures() -> None:
    """Makes benchmarks/FIGURES.md and the README's table current from the results JSON (`python -m benchmarks
    figures`), so a committed result never leaves the page stale; a failure is printed, not raised."""
    done = subprocess.run([sys.executable, "-m", "benchmarks", "figures"], cwd=REPO, capture_output=True, text=True)
    said = (done.stdout or done.stderr).strip().splitlines()
    if said:
        print(said[-1] if done.returncode == 0 else f"FIGURES.md not refreshed: {said[-1]}", flush=True)


def print_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> None:
    """A plain left-aligned text table."""
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def run_timed(argv: Sequence[str], env: dict[str, str] | None = None, log: Path | None = None) -> dict[str, Any]:
    """Runs `argv`, output to `log` (or inherited).

    Returns exit_code, wall_s and cpu_s (user + system CPU seconds of the child and its threads: less
    sensitive than wall time to other processes sharing the cores).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as handle:
            code = subprocess.call(list(argv), env=env, stdout=handle, stderr=subprocess.STDOUT)
    else:
        code = subprocess.call(list(argv), env=env)
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"exit_code": code, "wall_s": round(wall_s, 2), "cpu_s": round(cpu_s, 2)}


def fresh_cache_env(cache_dir: Path) -> dict[str, str]:
    """The current environment with rlfit's persistent compile cache pointed at `cache_dir` (cold if empty)."""
    env = dict(os.environ)
    env["RLFIT_CACHE_DIR"] = str(cache_dir)
    return env


def quick_cache(fresh: Path, quick: bool) -> Path:
    """The compile cache of a check whose figure is not a cold compile: `fresh` (empty) for its full run; for its
    `--quick` check the cache RLFIT_CACHE_DIR already names, where set (the test session's, where every quick check
    runs: the toy environment's smoke programs one check compiled are cache hits in the next), else `fresh`."""
    return Path(os.environ["RLFIT_CACHE_DIR"]) if quick and os.environ.get("RLFIT_CACHE_DIR") else fresh


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "-" if value is None else str(value)


def load_playground_jax(name: str) -> Any:
    """Playground's `name` with MJX impl='jax', robots (G1) read from RLFIT_MENAGERIE_PATH when it is set (the
    offline Menagerie copy rlfit reads): the same environment in rlfit's venv and in the Brax venv."""
    from mujoco_playground import registry

    if os.environ.get("RLFIT_MENAGERIE_PATH"):
        from etils import epath
        from mujoco_playground._src import mjx_env

        mjx_env.MENAGERIE_PATH = epath.Path(os.environ["RLFIT_MENAGERIE_PATH"])
    return registry.load(name, config_overrides={"impl": "jax"})


MENAGERIE = (REPO / ".." / "shared" / "assets" / "mujoco_menagerie").resolve()
"""The shared Menagerie copy G1 needs (as tests/envs/test_assets.py finds it); RLFIT_MENAGERIE_PATH wins."""


def child_env(cache: Path, src: str | None, **variables: str) -> dict[str, str]:
    """This process's environment for a benchmark's child: its compile cache `cache`, unbuffered output, the shared
    Menagerie unless RLFIT_MENAGERIE_PATH is set, `variables`, and `src` (another checkout's src folder) first on
    PYTHONPATH when given."""
    env = {**os.environ, "RLFIT_CACHE_DIR": str(cache), "PYTHONUNBUFFERED": "1", **variables}
    env.setdefault("RLFIT_MENAGERIE_PATH", str(MENAGERIE))
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH")] if p])
    return env
