"""kill -9 at random instants, then resume: resume must always work and lose at most one save interval.

Method: start `rlfit train` on the toy environment (tests/toy_env.py) with a checkpoint every
`--save-interval` iterations; once training has logged its first iteration, wait a random time and SIGKILL
it; note the last iteration logged in metrics.jsonl; `rlfit resume` to a few iterations past it; record the
checkpoint it resumed from. Lost work = last logged iteration - resumed iteration.

    .venv/bin/python benchmarks/kill9_stress.py --repeats 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import finish_record, start_record

REPO = Path(__file__).resolve().parents[1]
TRAIN = ["tests.toy_env:make", "--preset", "smoke", "--set", "env.episode_length=50", "--set", "run.eval_every=0",
         "--timesteps", "800000", "--quiet"]


def rlfit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlfit", *args]


def last_logged_iteration(run_dir: Path) -> int:
    """The last complete train row of metrics.jsonl (a torn line from the kill is ignored)."""
    last = 0
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if row.get("kind") == "train":
            last = row["iteration"]
    return last


def one_round(work: Path, env: dict, save_interval: int, max_delay_s: float, rng: random.Random) -> dict:
    run_dir = work / f"run-{rng.getrandbits(32):08x}"
    process = subprocess.Popen(rlfit_command("train", *TRAIN, "--set", f"run.save_interval={save_interval}",
                                             "--run-dir", str(run_dir)), env=env, cwd=work,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    metrics = run_dir / "metrics.jsonl"
    while not (metrics.exists() and metrics.stat().st_size > 0):
        if process.poll() is not None:
            raise RuntimeError(f"training exited early: {process.stderr.read().decode()}")
        time.sleep(0.05)
    delay = rng.uniform(0.0, max_delay_s)
    time.sleep(delay)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    logged = last_logged_iteration(run_dir)
    saved = sorted(int(p.name) for p in (run_dir / "checkpoints").glob("*") if p.name.isdigit())
    target = logged + 3
    resumed = subprocess.run(rlfit_command("resume", str(run_dir), "--iterations", str(target), "--quiet"),
                             env=env, cwd=work, capture_output=True, text=True)
    summary = json.loads((run_dir / "summary.json").read_text()) if resumed.returncode == 0 else {}
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    train_iterations = [row["iteration"] for row in rows if row["kind"] == "train"]
    redone = len(train_iterations) - len(set(train_iterations))
    skipped = {step for step in saved if any(f"{step:08d}" in line for line in resumed.stderr.splitlines())}
    usable = [step for step in saved if step not in skipped]
    first_redone = usable[-1] if usable else None
    return {
        "kill_after_first_row_s": round(delay, 3),
        "last_logged_iteration": logged,
        "resumed_from_iteration": first_redone,
        "lost_iterations": logged - first_redone if first_redone is not None else None,
        "resume_exit_code": resumed.returncode,
        "resume_warnings": [line for line in resumed.stderr.splitlines() if line],
        "final_iterations": summary.get("iterations"),
        "checkpoints_on_disk_after_kill": saved,
        "skipped_as_corrupt": sorted(skipped),
        "metrics_rows_1_to_target_without_gaps": train_iterations == list(range(1, target + 1)),
        "duplicate_rows": redone,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--save-interval", type=int, default=5)
    parser.add_argument("--max-delay", type=float, default=3.0, help="seconds after the first logged iteration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "kill9_stress.json"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = dict(os.environ, PYTHONPATH=str(REPO), RLFIT_CACHE_DIR=str(work / "cache"))
        rounds = []
        for index in range(args.repeats):
            result = one_round(work, env, args.save_interval, args.max_delay, rng)
            rounds.append(result)
            print(f"{index + 1:2d}: killed {result['kill_after_first_row_s']:.2f}s in, logged "
                  f"{result['last_logged_iteration']}, resumed from {result['resumed_from_iteration']}, "
                  f"lost {result['lost_iterations']}, resume exit {result['resume_exit_code']}", flush=True)
    lost = [r["lost_iterations"] for r in rounds]
    report = start_record("kill9_stress") | {
        "save_interval": args.save_interval,
        "repeats": args.repeats,
        "all_resumed": all(r["resume_exit_code"] == 0 and r["final_iterations"] is not None for r in rounds),
        "max_lost_iterations": max(lost),
        "never_lost_more_than_one_interval": all(x is not None and x <= args.save_interval for x in lost),
        "rounds": rounds,
    }
    finish_record(report, Path(args.out))
    print(f"all resumed: {report['all_resumed']}; max lost iterations: {report['max_lost_iterations']} "
          f"(save interval {args.save_interval})")


if __name__ == "__main__":
    main()
