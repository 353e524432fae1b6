"""How long the command line takes to answer what needs no JAX: `rlfit --help`, `--version`, a misspelled option and a
missing run directory (resume, export, play), against `python -c pass` (issue 64, item 7).

Each case is a new process (`python -m rlfit ...`, what the `rlfit` script runs), timed `--repeats` times in turn
(case after case, so a burst of load on the shared cores spreads over all of them); the record keeps every wall time
and their min, median and max, the CPU seconds each took (user + system: what the process costs whatever else
shares the cores), the exit code, the first line it printed, and whether it imported JAX (one more run
under `python -X importtime`, not timed).

    .venv/bin/python benchmarks/cli_startup.py                     # 7 repeats: results/cli_startup.json
    .venv/bin/python benchmarks/cli_startup.py --src /tmp/main/src --tag before   # another checkout's code
    .venv/bin/python benchmarks/cli_startup.py --quick             # 1 repeat: a check of the script (results/tmp/)
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import TMP, child_env, finish_record, print_table, start_record  # noqa: E402

MISSING = "no-such-run-dir"
"""A run directory that does not exist (relative to the children's working folder, an empty temporary one)."""
CASES = {
    "python -c pass": ["-c", "pass"],
    "rlfit --help": ["-m", "rlfit", "--help"],
    "rlfit --version": ["-m", "rlfit", "--version"],
    "rlfit export RUN --formt onnx": ["-m", "rlfit", "export", MISSING, "--formt", "onnx"],
    "rlfit resume MISSING": ["-m", "rlfit", "resume", MISSING],
    "rlfit export MISSING": ["-m", "rlfit", "export", MISSING],
    "rlfit play MISSING": ["-m", "rlfit", "play", MISSING],
}
"""Case name -> the Python interpreter's arguments. The first is the floor: an interpreter that imports nothing."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of each case (default: 7)")
    parser.add_argument("--src", help="run on this checkout's src folder (PYTHONPATH), e.g. the code before a change")
    parser.add_argument("--tag", default="", help="a suffix for the record's name (e.g. before)")
    parser.add_argument("--quick", action="store_true", help="1 repeat: a check of the script (results/tmp/)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.quick:
        args.repeats, args.tag = 1, "quick"
    return args


class Run(NamedTuple):
    """One run of a case."""

    wall_s: float
    cpu_s: float
    """User + system CPU seconds of the process (what it costs, whatever else shares the cores)."""
    exit_code: int
    first_line: str
    """Its first line of output: stdout, else stderr."""


def run_once(argv: list[str], env: dict[str, str], work: Path) -> Run:
    """Runs `argv` once in `work` and times it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    lines = (done.stdout or done.stderr).strip().splitlines()
    return Run(wall, cpu, done.returncode, lines[0] if lines else "")


def imports_jax(argv: list[str], env: dict[str, str], work: Path) -> bool:
    """Whether `argv` imports JAX: `-X importtime` lists every module a process imports, on stderr."""
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, cwd=work, capture_output=True, text=True)
    return any(line.rsplit("|", 1)[-1].strip() == "jax" for line in done.stderr.splitlines())


def measure(args: argparse.Namespace, work: Path) -> dict[str, dict[str, Any]]:
    """Every case `args.repeats` times, in turn; per case its times, their summary, exit code and first line."""
    env = child_env(work / "cache", args.src)
    runs: dict[str, list[Run]] = {name: [] for name in CASES}
    for repeat in range(args.repeats):
        for name, rest in CASES.items():
            runs[name].append(run_once([sys.executable, *rest], env, work))
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
    return {name: summary(["python", *rest], runs[name], imports_jax([sys.executable, *rest], env, work))
            for name, rest in CASES.items()}


def summary(argv: list[str], runs: list[Run], jax: bool) -> dict[str, Any]:
    """A case's record: its runs' wall and CPU seconds (each, and min, median, max of the wall time), the last
    run's exit code and first line, and whether it imports JAX."""
    walls = [round(run.wall_s, 3) for run in runs]
    cpus = [round(run.cpu_s, 3) for run in runs]
    return {"argv": argv, "exit_code": runs[-1].exit_code, "first_line": runs[-1].first_line[:200], "imports_jax": jax,
            "wall_s": walls, "min_s": min(walls), "median_s": round(statistics.median(walls), 3), "max_s": max(walls),
            "cpu_s": cpus, "median_cpu_s": round(statistics.median(cpus), 3)}


def source_commit(src: str | None) -> str | None:
    """The commit of the checkout `src` lies in (None for this one: the record's `git` says it)."""
    if not src:
        return None
    done = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def main() -> None:
    args = parse_args()
    record = start_record("cli_startup" + (f"_{args.tag}" if args.tag else ""))
    record.update({"repeats": args.repeats, "src": args.src, "src_commit": source_commit(args.src)})
    work = TMP / "cli_startup_work"
    work.mkdir(parents=True, exist_ok=True)
    record["cases"] = measure(args, work)
    floor = record["cases"]["python -c pass"]["median_s"]
    print_table([(name, case["min_s"], case["median_s"], case["max_s"], round(case["median_s"] - floor, 3),
                  case["median_cpu_s"], case["exit_code"], case["imports_jax"]) for name, case in record["cases"].items()],
                ("case", "min s", "median s", "max s", "median over python", "median CPU s", "exit", "JAX"))
    finish_record(record)


if __name__ == "__main__":
    main()
