"""Algorithms at equal wall clock (issue 32, item 3): FastTD3 against rlfit's SAC and PPO, each with its own preset,
on several environments and seeds, with the statistics of rlfit's report.

    .venv/bin/python benchmarks/algo_compare.py                        # 3 DM Control envs x 3 algos x 3 seeds, 90 s each
    .venv/bin/python benchmarks/algo_compare.py --envs CartpoleSwingup CartpoleBalance --order env --concurrent \
        --budget 4m --no-warm-up --cache benchmarks/results/tmp/algo_compare_cache   # as measured on 2026-11-24
    .venv/bin/python benchmarks/algo_compare.py --envs G1JoystickFlatTerrain --budget 20m   # the GPU comparison
    .venv/bin/python benchmarks/algo_compare.py --quick                # a check of the script (results/tmp/): the toy env,
                                                                       # FastTD3 alone
    .venv/bin/python benchmarks/algo_compare.py --report benchmarks/results/algo_compare.json   # a stopped run's statistics
    .venv/bin/python benchmarks/algo_compare.py --report A.json B.json --out AB.json   # two runs' seeds together

Equal wall clock: every run gets the same `run.time_budget`, which rlfit counts from the start of its training
session (building the starting state, loading or compiling the programs, the iterations and their periodic
evaluations; not the process start, Python's imports or the final evaluation) and honours by not starting an
iteration that would not fit. `run.num_timesteps` is set far beyond what fits, so the budget ends every run. Before
the measured runs, one warm-up run per (environment, algorithm) fills a compile cache that the measured runs share
(`--no-warm-up` with `--cache DIR`: a cache warmed before; without a warm cache each (environment, algorithm)'s
first seed compiles inside its budget), so the budget buys training, not XLA.

Each environment is an experiment (`rlfit experiment`'s directory: one variant per algorithm, one trial per seed)
whose trials this script trains, each in its own process under `nice -n 5`. By default one at a time, interleaved:
seed by seed over the environments (`--order env`: an environment's seeds, then the next environment), with the
algorithms' order rotated each time, so that other load on the machine falls on every algorithm alike. With
`--concurrent` an (environment, seed)'s algorithms run at the same time, in one wall-clock window under the same
load. The 1-minute load average is sampled every 10 s during each run. After training, each trial's final policy
is evaluated on `--episodes` episodes (the suite `final-policy`, the deterministic policy), and rlfit's report
statistics (`rlfit.study.stats`) give each algorithm's IQM and mean with 95% intervals and the pairwise
differences (`rlfit report` itself counts a trial stopped by its time budget as paused, not finished, and leaves
it out). Preset `auto`: `g1` for the G1/T1 humanoids (algorithms fasttd3 and ppo, the ones with a g1 preset), else
`quick`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from common import (RESULTS, TMP, TOY_ENV, finish_record, fresh_cache_env, load_1min, print_table, start_record,
                    toy_env_importable)

DEFAULT_ENVS = ("CartpoleBalance", "CartpoleSwingup", "ReacherEasy")
ALGOS = ("fasttd3", "sac", "ppo")
HUMANOID_ALGOS = ("fasttd3", "ppo")
QUICK_ALGOS = ("fasttd3",)
"""--quick's algorithm: one, its round of one run at once; each algorithm is two processes (its warm-up, then the
run: 6.4 and 4.9 CPU seconds measured), and SAC's and PPO's take the same code path (FastTD3 and SAC cost 25 CPU
seconds, 2026-11-28). The target's comparison of two algorithms is checked without training
(tests/benchmarks/test_algo_compare.py)."""
SUITE = "final-policy"
MEASURE = f"suite/{SUITE}"
NUM_TIMESTEPS = 10_000_000_000  # never reached: the time budget ends every run
LOAD_SAMPLE_S = 10.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS))
    parser.add_argument("--algos", nargs="+", default=None, choices=ALGOS,
                        help="default: fasttd3 sac ppo (fasttd3 ppo on the G1/T1 humanoids)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", default="90s", help="run.time_budget of every run ('2m', '90s', '20m')")
    parser.add_argument("--preset", default="auto", help="every algorithm's preset (auto: g1 for humanoids, else quick)")
    parser.add_argument("--episodes", type=int, default=16, help="episodes of each final policy's evaluation")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="for every run")
    parser.add_argument("--no-warm-up", action="store_true", help="no warm-up runs: first seeds compile in budget")
    parser.add_argument("--cache", type=Path, default=None, help="compile cache to use (default: a new one in the work dir)")
    parser.add_argument("--warm-up-parallel", type=int, default=3, help="warm-up runs at once (they only compile)")
    parser.add_argument("--order", choices=("seed", "env"), default="seed",
                        help="seed: each seed over every environment in turn; env: one environment's seeds, then the next")
    parser.add_argument("--concurrent", action="store_true",
                        help="each (environment, seed)'s algorithms at the same time, in the same wall-clock window")
    parser.add_argument("--report", type=Path, nargs="+", default=None, metavar="RECORD_JSON",
                        help="train nothing: the statistics of the records' runs, written into the first record "
                             "(after a stopped run, or to join runs measured by several commands)")
    parser.add_argument("--out", type=Path, default=None,
                        help="with --report: where the joined record goes (default: the first RECORD_JSON, rewritten)")
    parser.add_argument("--warm-up-only", action="store_true", help="fill the compile cache (--cache), measure nothing")
    parser.add_argument("--quick", action="store_true", help="the toy environment (tests/toy_env.py), smoke preset, "
                        f"one seed, {' and '.join(QUICK_ALGOS)} (unless --algos), 2 s runs, 2 episodes: checks "
                        "the script only")
    parser.add_argument("--name", default="", help="record name (default algo_compare[_ENV])")
    parser.add_argument("--child", nargs=3, metavar=("EXP_DIR", "VARIANT", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:  # every step of a run, each program compiled in a second or two
        args.envs, args.preset, args.seeds, args.budget, args.episodes = [TOY_ENV], "smoke", args.seeds[:1], "2s", 2
        args.algos = args.algos or list(QUICK_ALGOS)
        args.concurrent, args.name = True, args.name or "algo_compare"
        toy_env_importable()
    return args


def label(env: str) -> str:
    """`env` as a file and experiment name ('tests.toy_env:make' -> 'tests.toy_env-make'; a Playground name as is)."""
    return env.replace(":", "-")


def preset_for(env: str, preset: str) -> str:
    if preset != "auto":
        return preset
    return "g1" if env.startswith(("G1", "T1")) else "quick"


def algos_for(env: str, args: argparse.Namespace) -> list[str]:
    if args.algos:
        return list(args.algos)
    return list(HUMANOID_ALGOS if env.startswith(("G1", "T1")) else ALGOS)


def manifest(env: str, args: argparse.Namespace) -> dict[str, Any]:
    """One environment's experiment: a variant per algorithm (its own preset), a trial per seed."""
    settings = {"run.time_budget": args.budget, "run.num_timesteps": NUM_TIMESTEPS}
    settings.update(dict(item.split("=", 1) for item in args.set))
    return {"name": f"algo_compare_{label(env)}", "env": env, "preset": preset_for(env, args.preset), "set": settings,
            "variants": [{"name": algo, "set": {"algo": algo}} for algo in algos_for(env, args)],
            "seeds": list(args.seeds), "suites": {SUITE: {"episodes": args.episodes}},
            "measures": ["env_steps", "final_eval_reward"]}


def start_experiments(args: argparse.Namespace, work: Path) -> dict[str, Path]:
    """env -> a new experiment directory (rlfit's, from the manifest this script writes)."""
    from rlfit.study.experiment import start_experiment

    experiments = {}
    for env in args.envs:
        path = work / f"{label(env)}.yaml"
        path.write_text(yaml.safe_dump(manifest(env, args), sort_keys=False))
        experiments[env] = start_experiment(path, root=work / "experiments").path
    return experiments


def schedule(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """(env, algo, seed) in the order run, the algorithms' order rotated for each seed (and environment): seed by
    seed over the environments (`--order seed`), or environment by environment, its seeds in turn (`--order env`:
    an environment's comparison is complete before the next one starts)."""
    order, turn = [], 0
    pairs = ([(seed, env) for seed in args.seeds for env in args.envs] if args.order == "seed"
             else [(seed, env) for env in args.envs for seed in args.seeds])
    for seed, env in pairs:
        algos = algos_for(env, args)
        rotated = algos[turn % len(algos):] + algos[:turn % len(algos)]
        order += [(env, algo, seed) for algo in rotated]
        turn += 1
    return order


def rounds(order: list[tuple[str, str, int]], concurrent: bool) -> list[list[tuple[str, str, int]]]:
    """The runs that start together: one at a time, or each (environment, seed)'s algorithms at once."""
    if not concurrent:
        return [[job] for job in order]
    groups: dict[tuple[str, int], list[tuple[str, str, int]]] = {}
    for job in order:
        groups.setdefault((job[0], job[2]), []).append(job)
    return list(groups.values())


def child(exp_dir: str, variant: str, seed: str) -> None:
    """In the child process: trains one trial and evaluates its final policy (`rlfit experiment`'s own steps)."""
    from rlfit.study.experiment import open_experiment
    from rlfit.study.manifest import Trial
    from rlfit.study.schedule import complete_trial

    complete_trial(open_experiment(exp_dir), Trial(variant, int(seed)))


def run_trial(exp_dir: Path, algo: str, seed: int, env_vars: dict[str, str], log: Path) -> dict[str, Any]:
    """Runs one trial in a child process under `nice -n 5`; wall clock, load samples, and its summary's figures."""
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(LOAD_SAMPLE_S):
            samples.append(load_1min())

    thread = threading.Thread(target=sample, daemon=True)
    before = load_1min()
    thread.start()
    started = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.call(["nice", "-n", "5", sys.executable, "-u", __file__, "--child", str(exp_dir), algo, str(seed)],
                               env=env_vars, stdout=handle, stderr=subprocess.STDOUT)
    wall_s = time.perf_counter() - started
    done.set()
    thread.join()
    run_dir = exp_dir / "trials" / algo / f"seed-{seed}"
    summary = read_json(run_dir / "summary.json")
    suites = read_json(run_dir / "suites.json")
    return {
        "algo": algo, "seed": seed, "exit_code": code, "process_wall_s": round(wall_s, 1),
        "loadavg_1min_before": before, "loadavg_1min_after": load_1min(),
        "loadavg_1min_mean": round(sum(samples) / len(samples), 2) if samples else before,
        "final_policy_reward": (suites.get(SUITE) or {}).get("episode_reward"),
        **{key: summary.get(key) for key in ("stopped_by", "train_wall_s", "compile_s", "init_s", "eval_s",
                                             "env_steps", "iterations", "sps_mean", "final_eval_reward")},
        "programs_from_cache": {p["name"]: p["from_cache"] for p in summary.get("programs", [])},
        "log": os.path.relpath(log, RESULTS.parent.parent),
    }


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def warm_up(args: argparse.Namespace, work: Path, env_vars: dict[str, str]) -> list[dict[str, Any]]:
    """One short run per (env, algo) with the measured runs' settings, filling the shared compile cache; up to
    `--warm-up-parallel` at once (compiling, not measured)."""
    from rlfit.study.experiment import start_experiment

    jobs = []
    for env in args.envs:
        warm = argparse.Namespace(**{**vars(args), "seeds": [0], "budget": "1s", "set": [*args.set, "run.eval_every=1"]})
        spec = manifest(env, warm)  # one iteration and its evaluation: every program the measured runs load
        spec["name"] = f"warm_{label(env)}"
        path = work / f"warm-{label(env)}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        exp_dir = start_experiment(path, root=work / "warm-up").path
        jobs += [(env, algo, exp_dir) for algo in algos_for(env, args)]

    def one(job: tuple[str, str, Path]) -> dict[str, Any]:
        env, algo, exp_dir = job
        row = run_trial(exp_dir, algo, 0, env_vars, work / "logs" / f"warm-{label(env)}-{algo}.log")
        print(f"warm-up {env} {algo}: {row['process_wall_s']}s (compile {row['compile_s']}), exit {row['exit_code']}",
              flush=True)
        return {"env": env, **row}

    with ThreadPoolExecutor(max_workers=args.warm_up_parallel) as pool:
        return list(pool.map(one, jobs))


def main() -> None:
    args = parse_args()
    if args.child:
        child(*args.child)
        return
    if args.report:
        records = [json.loads(path.read_text()) for path in args.report]
        joined = {**records[0], "runs": [run for record in records for run in record.get("runs", [])]}
        if len(records) > 1:
            joined["joined"] = [{key: record.get(key) for key in ("command", "date", "git", "loadavg_1min_start",
                                                                  "loadavg_1min_end", "work_dir")} for record in records]
        finish_with_reports(joined, args.out or args.report[0])
        return
    name = args.name or ("algo_compare" + ("" if args.envs == list(DEFAULT_ENVS) else "_" + "_".join(args.envs)))
    name += "_quick" if args.quick else ""
    record = start_record(name)
    work = TMP / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    work.mkdir(parents=True)
    (work / "logs").mkdir()
    env_vars = fresh_cache_env(args.cache or work / "cache")
    record.update({"budget": args.budget, "episodes": args.episodes, "seeds": args.seeds, "work_dir": str(work),
                   "presets": {env: preset_for(env, args.preset) for env in args.envs}, "set": args.set,
                   "warm_up": not args.no_warm_up, "nice": 5,
                   "equal_wall_clock": "run.time_budget per run, counted by rlfit from its training session's start "
                                       "(starting state, programs from the warmed compile cache, iterations, periodic "
                                       "evaluations); process start, imports and the final evaluation excluded"})
    record["warm_up_runs"] = [] if args.no_warm_up else warm_up(args, work, env_vars)
    if args.warm_up_only:
        return
    experiments = start_experiments(args, work)
    record["order"] = args.order
    record["concurrent"] = args.concurrent
    record["experiments"] = {env: str(path) for env, path in experiments.items()}
    runs = []
    for group in rounds(schedule(args), args.concurrent):
        with ThreadPoolExecutor(max_workers=len(group)) as pool:
            rows = list(pool.map(lambda job: run_trial(experiments[job[0]], job[1], job[2], env_vars,
                                                       work / "logs" / f"{label(job[0])}-{job[1]}-seed{job[2]}.log"),
                                  group))
        for (env, algo, seed), row in zip(group, rows, strict=True):
            runs.append({"env": env, "concurrent_with": [a for _, a, _ in group if a != algo], **row})
            print(f"[{len(runs)}] {time.strftime('%H:%M:%S')} {env} {algo} seed {seed}: final policy "
                  f"{row['final_policy_reward']}, {row['env_steps']} steps in {row['train_wall_s']}s of training, "
                  f"process {row['process_wall_s']}s, load {row['loadavg_1min_mean']}", flush=True)
        record["runs"] = runs
        finish_record(dict(record))  # a partial record after each run
    record["experiments"] = {env: str(path) for env, path in experiments.items()}
    finish_with_reports(record)


def finish_with_reports(record: dict[str, Any], out: Path | None = None) -> None:
    """Each environment's statistics (`statistics`), the target, a table, the record."""
    runs = record.get("runs", [])
    record["statistics"] = {env: statistics([r for r in runs if r["env"] == env])
                            for env in dict.fromkeys(r["env"] for r in runs)}
    record["target"] = target(record["statistics"])
    print_table([[r["env"], r["algo"], r["seed"], r["final_policy_reward"], r["env_steps"], r["train_wall_s"],
                  r["loadavg_1min_mean"]] for r in runs],
                ["env", "algo", "seed", "final policy", "env steps", "train s", "load"])
    finish_record(record, out)


def statistics(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """rlfit's report statistics (`rlfit.study.stats`: IQM and mean with 95% intervals, pairwise differences) of
    the final policies' rewards. `rlfit report` itself leaves these trials out: a trial stopped by run.time_budget
    is paused, not finished, in an experiment (`rlfit experiment resume` would go on training it)."""
    from rlfit.study.stats import compare, interval_estimates

    scores = {}
    for run in runs:
        if run["final_policy_reward"] is not None:
            scores.setdefault(run["algo"], []).append(run["final_policy_reward"])
    arrays = {algo: np.array(values) for algo, values in scores.items()}
    estimates = {algo: est._asdict() for algo, est in interval_estimates(arrays).items()}
    pairs = [(a, b) for i, a in enumerate(arrays) for b in list(arrays)[i + 1:] if min(arrays[a].size, arrays[b].size) > 1]
    comparisons = [compare(a, arrays[a], b, arrays[b])._asdict() for a, b in sorted(pairs, key=_fasttd3_first)]
    steps = {algo: [r["env_steps"] for r in runs if r["algo"] == algo] for algo in arrays}
    return {"measure": f"{SUITE}: mean return of the final deterministic policy", "scores": scores,
            "estimates": estimates, "comparisons": comparisons, "env_steps": steps}


def _fasttd3_first(pair: tuple[str, str]) -> tuple[int, str]:
    return (0 if pair[0] == "fasttd3" else 1, pair[1])


def target(reports: dict[str, Any]) -> dict[str, Any]:
    """Issue 32: FastTD3's IQM at least SAC's on two of three environments (as measured)."""
    wins = {}
    for env, entry in reports.items():
        estimates = entry.get("estimates") or {}
        if "fasttd3" in estimates and "sac" in estimates:
            wins[env] = estimates["fasttd3"]["iqm"] >= estimates["sac"]["iqm"]
    return {"fasttd3_iqm_at_least_sac": wins, "met": sum(wins.values()) >= 2 if len(wins) >= 3 else None}


if __name__ == "__main__":
    main()
