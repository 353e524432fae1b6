"""kill -9 at random instants, then resume: resume must always work and lose at most one save interval, and
TensorBoard must agree with metrics.jsonl.

Method: start `rlfit train` on the toy environment (tests/toy_env.py) with a checkpoint every
`--save-interval` iterations; SIGKILL it at a random instant: in `--early-fraction` of the rounds anywhere
from the process start (imports, environment, compile, first checkpoint), in the others up to `--max-delay`
seconds after its first logged iteration; note the last iteration logged in metrics.jsonl and check what the
kill left (TensorBoard holds every logged row but perhaps the one being written; summary.json absent or
whole; no damaged metrics line); `rlfit resume` to a few iterations past it; record the checkpoint it resumed
from and check that TensorBoard (read with its own EventAccumulator) and metrics.jsonl agree row for row.
Lost work = last logged iteration - resumed iteration.

    .venv/bin/python benchmarks/kill9_stress.py --repeats 20
    .venv/bin/python benchmarks/kill9_stress.py --quick      # 2 rounds (seed 0: one late kill, within 1 s of the
                                                             # first row; one early, within 1 s of the start, before
                                                             # the run directory exists): a check (results/tmp/),
                                                             # the smoke preset's episodes, in the compile cache
                                                             # RLFIT_CACHE_DIR names where set (the test session's)
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

from common import finish_record, quick_cache, start_record

REPO = Path(__file__).resolve().parents[1]
QUICK_TRAIN = ["tests.toy_env:make", "--preset", "smoke", "--set", "run.eval_every=0", "--timesteps", "800000",
               "--quiet"]
"""--quick's run: the smoke preset as it is (episodes of 100 steps), whose programs quickstart.py's check compiled
into the cache the test session's checks share (`quick_cache`): its round reads them instead of compiling."""
TRAIN = [*QUICK_TRAIN, "--set", "env.episode_length=50"]
"""The full run's: episodes of 50 steps."""


def rlfit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlfit", *args]


def last_logged_iteration(run_dir: Path) -> int:
    """The last complete train row of metrics.jsonl (a torn line from the kill is ignored)."""
    from rlfit.sinks.jsonl import read_rows

    return max((r["iteration"] for r in read_rows(run_dir / "metrics.jsonl") if r.get("kind") == "train"), default=0)


def tensorboard_steps(run_dir: Path) -> dict[str, dict[int, float]]:
    """TensorBoard's own reading of run_dir/tb: tag -> {step: value}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in accumulator.Tags()["scalars"]}


def tensorboard_vs_metrics(run_dir: Path) -> dict:
    """Rows of metrics.jsonl missing from TensorBoard, and TensorBoard steps metrics.jsonl lacks."""
    from rlfit.sinks.jsonl import read_metrics

    found = read_metrics(run_dir / "metrics.jsonl")
    rows = [r for r in found.rows if r["kind"] == "train"]
    board = tensorboard_steps(run_dir).get("loss/total", {}) if (run_dir / "tb").exists() else {}
    logged = [r["env_steps"] for r in rows]
    return {"rows": len(rows), "missing_in_tensorboard": [s for s in logged if s not in board],
            "extra_in_tensorboard": sorted(set(board) - set(logged)),
            "values_differ": sum(1 for r in rows if r["env_steps"] in board
                                 and abs(board[r["env_steps"]] - r["loss/total"]) > 1e-5 * (1 + abs(r["loss/total"]))),
            "damaged_metrics_lines": found.damaged}


def summary_state(run_dir: Path) -> str:
    path = run_dir / "summary.json"
    if not path.exists():
        return "absent"
    try:
        json.loads(path.read_text())
        return "whole"
    except ValueError:
        return "torn"


def kill_at_random(process: subprocess.Popen, metrics: Path, early: bool, max_delay_s: float,
                   max_early_s: float, rng: random.Random) -> tuple[str, float]:
    """SIGKILLs `process`, early (from its start) or after its first logged row; returns (when, delay)."""
    if not early:
        while not (metrics.exists() and metrics.stat().st_size > 0):
            if process.poll() is not None:
                raise RuntimeError(f"training exited early: {process.stderr.read().decode()}")
            time.sleep(0.05)
    delay = rng.uniform(0.0, max_early_s if early else max_delay_s)
    time.sleep(delay)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return ("from start" if early else "after first row"), delay


def one_round(work: Path, env: dict, save_interval: int, max_delay_s: float, rng: random.Random,
              early: bool, max_early_s: float, train: list[str] = TRAIN) -> dict:
    run_dir = work / f"run-{rng.getrandbits(32):08x}"
    process = subprocess.Popen(rlfit_command("train", *train, "--set", f"run.save_interval={save_interval}",
                                             "--run-dir", str(run_dir)), env=env, cwd=work,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    metrics = run_dir / "metrics.jsonl"
    when, delay = kill_at_random(process, metrics, early, max_delay_s, max_early_s, rng)
    if not run_dir.exists():
        return {"killed": when, "kill_delay_s": round(delay, 3), "run_dir_created": False}
    logged = last_logged_iteration(run_dir) if metrics.exists() else 0
    after_kill = tensorboard_vs_metrics(run_dir)
    summary_after_kill = summary_state(run_dir)
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
    first_redone = usable[-1] if usable else (0 if "before its first checkpoint" in resumed.stderr else None)
    after_resume = tensorboard_vs_metrics(run_dir)
    return {
        "killed": when,
        "kill_delay_s": round(delay, 3),
        "run_dir_created": True,
        "tensorboard_after_kill": after_kill,
        "tensorboard_holds_all_but_the_last_row": not after_kill["extra_in_tensorboard"]
        and set(after_kill["missing_in_tensorboard"]) <= {max(after_kill["missing_in_tensorboard"], default=0)},
        "summary_after_kill": summary_after_kill,
        "tensorboard_after_resume": after_resume,
        "tensorboard_equals_metrics_after_resume": not after_resume["missing_in_tensorboard"]
        and not after_resume["extra_in_tensorboard"] and after_resume["values_differ"] == 0,
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
    parser.add_argument("--early-fraction", type=float, default=0.3,
                        help="share of rounds killed at any instant from the process start instead")
    parser.add_argument("--max-early", type=float, default=8.0, help="seconds after the start, for early kills")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2 rounds, --max-delay 1, --max-early 1: a check of "
                        "the script (results/tmp/)")
    parser.add_argument("--out", default=None, help="JSON path (default results/kill9_stress.json)")
    args = parser.parse_args()
    if args.quick:  # the early kill lands in the imports: no run directory, no resume (the late round resumes)
        args.repeats, args.max_delay, args.max_early = 2, 1.0, 1.0
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cache = quick_cache(work / "cache", args.quick)
        env = dict(os.environ, PYTHONPATH=str(REPO), RLFIT_CACHE_DIR=str(cache))
        rounds = []
        for index in range(args.repeats):
            early = rng.random() < args.early_fraction
            result = one_round(work, env, args.save_interval, args.max_delay, rng, early, args.max_early,
                               QUICK_TRAIN if args.quick else TRAIN)
            rounds.append(result)
            if not result["run_dir_created"]:
                print(f"{index + 1:2d}: killed {result['kill_delay_s']:.2f}s from start, before the run directory "
                      "existed", flush=True)
                continue
            print(f"{index + 1:2d}: killed {result['kill_delay_s']:.2f}s {result['killed']}, logged "
                  f"{result['last_logged_iteration']}, resumed from {result['resumed_from_iteration']}, "
                  f"lost {result['lost_iterations']}, resume exit {result['resume_exit_code']}, tensorboard "
                  f"{'=' if result['tensorboard_equals_metrics_after_resume'] else '!='} metrics", flush=True)
    rounds_with_run = [r for r in rounds if r["run_dir_created"]]
    lost = [r["lost_iterations"] for r in rounds_with_run]
    report = start_record("kill9_stress_quick" if args.quick else "kill9_stress") | {
        "save_interval": args.save_interval,
        "repeats": args.repeats,
        "early_fraction": args.early_fraction,
        "rounds_killed_before_the_run_directory_existed": len(rounds) - len(rounds_with_run),
        "all_resumed": all(r["resume_exit_code"] == 0 and r["final_iterations"] is not None for r in rounds_with_run),
        "max_lost_iterations": max(lost, default=None),
        "never_lost_more_than_one_interval": all(x is not None and x <= args.save_interval for x in lost),
        "tensorboard_held_all_but_the_last_row_after_every_kill": all(
            r["tensorboard_holds_all_but_the_last_row"] for r in rounds_with_run),
        "tensorboard_equal_to_metrics_after_every_resume": all(
            r["tensorboard_equals_metrics_after_resume"] for r in rounds_with_run),
        "summary_never_torn": all(r["summary_after_kill"] != "torn" for r in rounds_with_run),
        "rounds": rounds,
    }
    finish_record(report, Path(args.out) if args.out else None)
    print(f"all resumed: {report['all_resumed']}; max lost iterations: {report['max_lost_iterations']} "
          f"(save interval {args.save_interval}); tensorboard = metrics after every resume: "
          f"{report['tensorboard_equal_to_metrics_after_every_resume']}")


if __name__ == "__main__":
    main()
