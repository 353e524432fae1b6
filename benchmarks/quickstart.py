"""The README's first command, timed as a user runs it: `rlfit train CartpoleBalance --preset quick`
(or with `--algo sac`, or any preset and overrides).

Runs the CLI as a subprocess (so the wall clock includes Python start-up, imports, environment
loading and compilation), then reads the run directory's summary.json and metrics.jsonl.
Target (issues 2 and 9): final eval reward >= 900 in under 600 s wall clock, compile included;
from pixels (issue 10, the SAC `pixels` preset): >= 800 within 3600 s.

    .venv/bin/python benchmarks/quickstart.py                 # seed 0, cold compile cache
    .venv/bin/python benchmarks/quickstart.py --seeds 0 1 2   # several seeds
    .venv/bin/python benchmarks/quickstart.py --algo sac --seeds 0 1 2   # SAC (results/quickstart_sac.json)
    .venv/bin/python benchmarks/quickstart.py --algo sac --preset pixels --seeds 0 1 \
        --target-reward 800 --target-wall-s 3600                         # pixels (results/quickstart_sac_pixels.json)
    .venv/bin/python benchmarks/quickstart.py --algo sac --preset pixels --set env.frames=8 \
        --set network.encoder=simple3dcnn --set run.time_budget=30m --set run.eval_every=2 --no-target \
        --name quickstart_sac_pixels_3d                                  # 8-frame clips, 30 minutes, as measured
    .venv/bin/python benchmarks/quickstart.py --quick         # the toy env, smoke preset, 2 iterations: a check
    .venv/bin/python benchmarks/quickstart.py --preset default --set run.time_budget=6m --set run.eval_every=1 \
        --no-target --name device_preset_before      # `rlfit train CartpoleBalance` before issue 43 (GPU settings)
    .venv/bin/python benchmarks/quickstart.py --preset none --set run.time_budget=6m --set run.eval_every=1 \
        --no-target --name device_preset_after       # and after: the preset chosen for this device

Resumable: the JSON is rewritten after each seed and a seed already in it (same command line) is skipped, so a
10-seed check can span sittings (`--commit` also commits the JSON after each seed). Each seed is judged twice: the
target (final >= --target-reward within --target-wall-s) and reliability (final >= --target-reward and >=
COLLAPSE_RATIO x its own best); `reliable_seeds` counts the second over the seeds in the file.

    .venv/bin/python benchmarks/quickstart.py --seeds 0 1 2 3 4 5 6 7 8 9 --name quickstart_10_seeds --commit

With `--parallel` the seeds train at the same time, each pinned to its own CPU core (`taskset`): a stricter test
of a wall-clock target than one seed with every core.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rlfit.algos.registry import ALGORITHMS

from common import (REPO, RESULTS, RLFIT, TMP, TOY_ENV, cpu_model, finish_record, fresh_cache_env, load_1min,
                    print_table, quick_cache, run_timed, start_record, toy_env_importable)

TARGET_REWARD = 900.0
TARGET_WALL_S = 600.0
QUICK_TIMESTEPS = 2 * 64  # two iterations of the smoke preset (64 env steps each), on the toy environment
QUICK_SET = ("run.eval_every=1",)  # an eval row per iteration: the eval curve has points
COLLAPSE_RATIO = 0.8
"""A seed is reliable when its final eval reward is at least the target and at least this fraction of its best."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--preset", default="quick", help="a preset, or none: no --preset (chosen for the device)")
    parser.add_argument("--algo", default="ppo", choices=sorted(ALGORITHMS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed on to rlfit train")
    parser.add_argument("--target-reward", type=float, default=TARGET_REWARD)
    parser.add_argument("--target-wall-s", type=float, default=TARGET_WALL_S)
    parser.add_argument("--no-target", action="store_true", help="report as measured, judge nothing")
    parser.add_argument("--parallel", action="store_true", help="train the seeds at once, one CPU core each")
    parser.add_argument("--name", default="", help="the record's name (default quickstart[_ALGO][_PRESET])")
    parser.add_argument("--warm-cache", action="store_true",
                        help="use rlfit's normal compile cache (default: an empty one, as on a fresh machine)")
    parser.add_argument("--quick", action="store_true", help=f"train the toy environment (tests/toy_env.py), smoke "
                        f"preset, {QUICK_TIMESTEPS} steps: a check of the script, not a result")
    parser.add_argument("--commit", action="store_true", help="git-commit the JSON after each seed")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default results/quickstart[_sac].json; --quick: results/tmp/...)")
    args = parser.parse_args()
    if args.quick:  # every step of a seed's run, its programs compiled in a second or two
        args.env, args.preset, args.set = TOY_ENV, "smoke", [*QUICK_SET, *args.set]
        toy_env_importable()
    return args


def train_command(args: argparse.Namespace, seed: int, run_dir: Path) -> list[str]:
    """The user's command line, plus the seed, a run directory and (with --quick) fewer steps."""
    preset = [] if args.preset == "none" else ["--preset", args.preset]  # none: rlfit chooses for the device
    argv = [str(RLFIT), "train", args.env, "--algo", args.algo, *preset, "--seed", str(seed),
            "--run-dir", str(run_dir)] + [arg for item in args.set for arg in ("--set", item)]
    if args.quick:
        argv += ["--timesteps", str(QUICK_TIMESTEPS)]
    return argv


def eval_curve(metrics_path: Path) -> list[dict[str, Any]]:
    """[{iteration, env_steps, wall_s, reward}] for every eval row (wall_s from the train row before it)."""
    from rlfit.sinks.jsonl import read_rows

    curve, wall_s = [], None
    for row in read_rows(metrics_path):
        if row.get("kind") == "train":
            wall_s = row.get("wall_s")
        elif row.get("kind") == "eval":
            curve.append({"iteration": row["iteration"], "env_steps": row["env_steps"], "train_wall_s": wall_s,
                          "reward": row["eval/episode_reward"]})
    return curve


def run_seed(args: argparse.Namespace, seed: int, core: int | None = None) -> dict[str, Any]:
    """Trains one seed in a fresh directory (on CPU core `core` alone when given) and returns its figures and
    verdict."""
    TMP.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"quickstart-seed{seed}-", dir=TMP))
    run_dir = work / "run"
    # --quick checks the script, not the cold compile: the cache RLFIT_CACHE_DIR names (the test session's) where set
    cache = quick_cache(work / "cache", args.quick)
    env = None if args.warm_cache else fresh_cache_env(cache)
    argv = train_command(args, seed, run_dir)
    load_before = load_1min()
    pinned = ["taskset", "-c", str(core)] if core is not None else []
    timed = run_timed(pinned + argv, env=env, log=work / "stdout.log")
    code, wall_s = timed["exit_code"], timed["wall_s"]
    result: dict[str, Any] = {"seed": seed, "argv": argv, "exit_code": code, "total_wall_s": wall_s,
                              "total_cpu_s": timed["cpu_s"],
                              "loadavg_1min_before": load_before, "loadavg_1min_after": load_1min(),
                              "cold_compile_cache": not args.warm_cache and cache == work / "cache", "run_dir": str(run_dir),
                              "cpu_core": core}
    summary_path = run_dir / "summary.json"
    if code != 0 or not summary_path.exists():
        result["passed"] = False
        result["error"] = f"exit code {code}; see {work / 'stdout.log'}"
        return result
    summary = json.loads(summary_path.read_text())
    for key in ("final_eval_reward", "best_eval_reward", "compile_s", "train_wall_s", "eval_s", "sps_mean",
                "env_steps", "iterations", "device", "impl", "params_digest", "versions"):
        result[key] = summary.get(key)
    result["eval_curve"] = eval_curve(run_dir / "metrics.jsonl")
    # Everything that is neither compile nor training: start-up, imports, env loading, writing files.
    result["overhead_s"] = round(wall_s - summary["compile_s"] - summary["train_wall_s"], 2)
    reached = [p for p in result["eval_curve"] if p["reward"] >= args.target_reward]
    result["first_eval_at_target"] = reached[0] if reached else None
    result["cpu_model"] = cpu_model()
    final, best = summary["final_eval_reward"], summary["best_eval_reward"]
    result["reliable"] = bool(final is not None and best is not None and final >= args.target_reward
                              and final >= COLLAPSE_RATIO * best)
    result["passed"] = None if args.quick or args.no_target else bool(
        summary["final_eval_reward"] is not None and summary["final_eval_reward"] >= args.target_reward
        and wall_s < args.target_wall_s)
    return result


def settings_key(args: argparse.Namespace) -> list[str]:
    """The command line a seed's run shares with every other seed of this record (seed and run directory left out)."""
    argv = train_command(args, -1, Path("<run>"))
    return [arg for arg in argv if arg not in ("-1", "<run>")]


def load_or_start(args: argparse.Namespace, name: str, out: Path) -> dict:
    """The record so far at `out` when it holds the same command line (its seeds are skipped), else a new one;
    another command line in `out` is an error (one line, exit 2), nothing written."""
    key = settings_key(args)
    if out.exists():
        record = json.loads(out.read_text())
        if record.get("settings") != key:
            print(f"quickstart.py: error: {out} holds runs of another command line "
                  f"({' '.join(record.get('settings') or ['?'])}); pass another --out or --name", file=sys.stderr)
            raise SystemExit(2)
        record.setdefault("sittings", []).append(start_record(name))
        return record
    record = start_record(name)
    record["settings"] = key
    return record


def summarize(record: dict, args: argparse.Namespace) -> None:
    """Counts of seeds that met the target and that were reliable, over every seed in the record."""
    runs = record["runs"]
    record["target"] = None if args.no_target else {"final_eval_reward_at_least": args.target_reward,
                                                    "total_wall_s_below": args.target_wall_s,
                                                    "reliable": f"final >= {args.target_reward:g} and >= "
                                                                f"{COLLAPSE_RATIO} x best"}
    record["seeds"] = [r["seed"] for r in runs]
    record["reliable_seeds"] = sum(bool(r.get("reliable")) for r in runs)
    record["all_passed"] = None if args.quick or args.no_target else all(r["passed"] for r in runs)


def commit(path: Path, message: str) -> None:
    """`git commit` of `path` alone; a failure is printed and the next seed's save retries."""
    for argv in (["git", "add", "--", str(path)], ["git", "commit", "-q", "-m", message, "--", str(path)]):
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"quickstart.py: git failed: {done.stderr.strip() or done.stdout.strip()}", flush=True)
            return


def main() -> None:
    args = parse_args()
    name = args.name or ("quickstart" + ("" if args.algo == "ppo" else f"_{args.algo}")
                         + ("" if args.preset == "quick" else f"_{args.preset}"))
    name += "_quick" if args.quick else ""
    out = args.out or (TMP if args.quick else RESULTS) / f"{name}.json"
    record = load_or_start(args, name, out)
    if args.quick:
        record["note"] = (f"--quick: the toy environment, smoke preset, {QUICK_TIMESTEPS} env steps; checks the "
                          "script, the target is not evaluated")
    record["parallel_one_core_each"] = args.parallel
    record.setdefault("runs", [])
    done = {r["seed"] for r in record["runs"] if r.get("exit_code") == 0}
    record["runs"] = [r for r in record["runs"] if r["seed"] in done]
    todo = [seed for seed in args.seeds if seed not in done]
    for seed in todo:
        print(f"seed {seed}: {' '.join(train_command(args, seed, Path('<tmp>')))}", flush=True)
    if args.parallel:
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < len(todo):
            raise SystemExit(f"--parallel needs a core per seed: {len(todo)} seeds, {len(cores)} cores")
        with ThreadPoolExecutor(max(len(todo), 1)) as pool:
            record["runs"] += list(pool.map(lambda pair: run_seed(args, *pair), zip(todo, cores)))
    else:
        for seed in todo:
            record["runs"].append(run_seed(args, seed))
            record["runs"].sort(key=lambda r: r["seed"])
            summarize(record, args)
            finish_record(record, out)
            if args.commit:
                commit(out, f"quickstart: {name} seed {seed}")
    record["runs"].sort(key=lambda r: r["seed"])
    rows = [[r["seed"], r.get("final_eval_reward"), r.get("best_eval_reward"), r["total_wall_s"], r.get("compile_s"),
             r.get("train_wall_s"), r.get("overhead_s"), r.get("sps_mean"), r.get("env_steps"),
             r["loadavg_1min_before"], r["passed"], r.get("reliable")]
            for r in record["runs"]]
    print_table(rows, ["seed", "final eval", "best eval", "wall s", "compile s", "train s", "other s", "sps_mean",
                       "env steps", "load", "pass", "reliable"])
    summarize(record, args)
    print(f"reliable on {record['reliable_seeds']} of {len(record['runs'])} seeds")
    finish_record(record, out)


if __name__ == "__main__":
    main()
