"""PPO's quick preset on the DM Control environments Playground registers, with Brax's PPO beside it (issue 44).

Three modes, one JSON (results/suite_4ep_gae_once.json, or --out):

- `--time-envs`: one short rlfit run per environment (the quick preset's sizes, PROBE_ITERATIONS iterations, an
  evaluation after each), its measured fixed cost (process start, compiling, writing) and its cost per iteration
  and per evaluation, extrapolated to the preset's whole run. An environment fits when that estimate is at most
  `--max-run-minutes` (default 12).
- the suite (no mode flag): for each environment that fits (cheapest first; or `--envs`), rlfit
  (`rlfit train ENV --preset quick`) on each of `--seeds` and Brax's `ppo.train` at the same settings
  (brax_compare.py's spec: the preset's sizes, hyperparameters and networks, deterministic evaluation on the
  preset's `num_eval_envs`) on each of `--brax-seeds`, one run at a time. Both sides train the same iterations:
  the preset's `run.num_timesteps` rounded up to whole evaluation periods (Brax trains whole epochs of
  `eval_every` iterations), evaluating every `eval_every` iterations.
- `--report`: the method page's table (between the `suite-table` markers of benchmarks/methods/suite.md) from the JSON.

Resumable: a probe or run already in the JSON is skipped, and the JSON is rewritten after each one (`--commit`
also commits it). `--budget-minutes` starts no run that its measured cost says would end past the budget.

Per environment: rlfit's and Brax's final and best eval reward per seed and the collapse check (final >=
COLLAPSE_RATIO x the run's best). Across the environments both sides finished: the IQM and mean of each side's
per-environment mean final, and of rlfit minus Brax per environment, with 95% intervals from rlfit's own
statistics (`rlfit.study.stats`; see suite_report.py).

    .venv/bin/python benchmarks/suite.py --time-envs --commit                  # cost of every environment
    .venv/bin/python benchmarks/suite.py --budget-minutes 60 --commit          # the suite, in sittings
    .venv/bin/python benchmarks/suite.py --envs PointMass --seeds --brax-seeds 0 1 2   # Brax only, one env
    .venv/bin/python benchmarks/suite.py --report                              # methods/suite.md's table from the JSON
    .venv/bin/python benchmarks/suite.py --set ppo.learning_rate=3e-4 --out results/suite_lr3e-4.json   # a variant
    .venv/bin/python benchmarks/suite.py --compare results/suite_8ep_gae_once.json   # its page: the settings side by side
    .venv/bin/python benchmarks/suite.py --out results/suite_8ep_gae_once.json --compare results/suite_4ep_gae_once.json --print
    .venv/bin/python benchmarks/suite.py --quick --envs CartpoleBalance        # 2 iterations: checks the script
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import Any

from brax_compare import BRAX_PYTHON, CHILD, brax_spec, ensure_brax_venv, ppo_shared_settings
from common import REPO, RESULTS, RLFIT, TMP, git_state, load_1min, machine, run_timed
from suite_report import (COLLAPSE_RATIO, env_summary, print_costs, print_summary, readme_table, suite_summary,
                          user_error, variants_table, write_readme_table, write_variants_table)

from rlfit.cli import OneLineParser

MAX_RUN_MINUTES = 12.0
"""An environment is in the suite when its estimated quick-preset run takes at most this long on this machine."""
PROBE_ITERATIONS = 3
"""Iterations of a `--time-envs` run (each followed by an evaluation); the first one's time is left out."""
QUICK_ITERATIONS, QUICK_EVAL_EVERY = 2, 1
DEFAULT_OUT = RESULTS / "suite.json"
QUICK_OUT = TMP / "suite_quick.json"
README = REPO / "benchmarks" / "methods" / "suite.md"
"""suite.py's method page, which holds the suite table and the variants table (between their markers)."""


def dm_control_envs() -> list[str]:
    """Every DM Control environment Playground registers, in its order."""
    from mujoco_playground import registry

    return list(registry.dm_control_suite.ALL_ENVS)


def parse_args(argv: Sequence[str] | None = None, known_envs: Sequence[str] | None = None) -> argparse.Namespace:
    """The options; bad input is one line and exit code 2 (OneLineParser)."""
    parser = OneLineParser(prog="suite.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--time-envs", action="store_true", help="time one short run per environment")
    modes.add_argument("--report", action="store_true", help="write the method page's suite table from the JSON and stop")
    modes.add_argument("--compare", type=Path, nargs="+", metavar="JSON", default=None,
                       help="write the method page's variants table: rlfit at the JSON's (--out's) settings against "
                            "each of these suite JSONs (e.g. results/suite_8ep_gae_once.json), and stop")
    parser.add_argument("--envs", nargs="+", default=None,
                        help="environments (default: every DM Control one; the suite: those that fit, cheapest first)")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2], help="rlfit's seeds (default 0 1 2)")
    parser.add_argument("--brax-seeds", type=int, nargs="*", default=[0, 1],
                        help="Brax's seeds (default 0 1; none: rlfit only)")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="a config override for both sides (rlfit's --set; Brax gets the PPO settings it "
                             "changes), e.g. ppo.num_updates_per_batch=8; pair it with its own --out")
    parser.add_argument("--budget-minutes", type=float, default=None,
                        help="start no run whose measured cost would end it past this many minutes from the start")
    parser.add_argument("--max-run-minutes", type=float, default=MAX_RUN_MINUTES,
                        help=f"the suite keeps environments whose run is estimated at most this long "
                             f"(default {MAX_RUN_MINUTES:g})")
    parser.add_argument("--commit", action="store_true", help="git-commit the JSON after each run")
    parser.add_argument("--print", action="store_true", dest="print_only",
                        help="--report/--compare: print the table instead of writing it into the method page")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_ITERATIONS} iterations, eval every {QUICK_EVAL_EVERY}: checks the script only")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default results/suite_4ep_gae_once.json; --quick: results/tmp/suite_quick.json)")
    args = parser.parse_args(argv)
    known = list(known_envs) if known_envs is not None else dm_control_envs()
    if args.envs and (unknown := [env for env in args.envs if env not in known]):
        parser.error(f"not DM Control environments: {', '.join(unknown)}; choose from {', '.join(known)}")
    if negative := [seed for seed in args.seeds + args.brax_seeds if seed < 0]:
        parser.error(f"seeds must be 0 or more, got {negative[0]}")
    for name in ("budget_minutes", "max_run_minutes"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"--{name.replace('_', '-')} must be a positive number of minutes, got {value:g}")
    args.out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    if (args.report or args.compare) and not args.out.exists():
        parser.error(f"--report/--compare: {args.out} does not exist; run the suite first (or pass --out)")
    if missing := [str(path) for path in args.compare or [] if not path.exists()]:
        parser.error(f"--compare: {', '.join(missing)} does not exist; name suite JSONs under benchmarks/results/")
    args.known_envs = known
    return args


def shared_settings(env: str, preset: str, quick: bool, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """brax_compare's shared PPO settings for `env` (the preset with `overrides`, `--set` strings), over the
    preset's steps rounded up to whole eval periods; `overrides` kept for rlfit's command line."""
    from rlfit.config.schema import resolve

    config = resolve(env, preset, overrides=list(overrides))
    p = config.ppo
    per_iteration = p.batch_size * p.num_minibatches * p.unroll_length * config.env.action_repeat
    eval_every = QUICK_EVAL_EVERY if quick else config.run.eval_every
    periods = math.ceil(config.run.num_timesteps / (per_iteration * eval_every))
    iterations = QUICK_ITERATIONS if quick else periods * eval_every
    shared = ppo_shared_settings(argparse.Namespace(env=env, preset=preset, seed=0, iterations=iterations,
                                                    eval_every=eval_every), overrides)
    rlfit_ppo = json.loads(json.dumps(dataclasses.asdict(config.ppo)))  # every PPO key rlfit resolved (tuples: lists)
    return shared | {"overrides": list(overrides), "rlfit_ppo": rlfit_ppo}


def settings_changed(stored: dict[str, Any], shared: dict[str, Any]) -> list[str]:
    """The settings (`ppo.advantages`, `iterations`, ...) in which the runs already in a record (`stored`, their
    shared settings) differ from what this command would run (`shared`): a preset changed since they ran. Keys
    that only one side has are not compared (records written before `rlfit_ppo` was kept)."""
    changed = [key for key in shared if key not in ("seed", "rlfit_ppo", "ppo") and key in stored
               and stored[key] != shared[key]]
    for section in ("ppo", "rlfit_ppo"):
        old, new = stored.get(section) or {}, shared.get(section) or {}
        changed += [f"ppo.{key}" for key in new if key in old and old[key] != new[key]]
    return sorted(set(changed))


def eval_curve(metrics_path: Path) -> list[dict[str, Any]]:
    """[{iteration, env_steps, reward, value_loss}] for every eval row (value loss of the iteration before)."""
    from rlfit.sinks.jsonl import read_rows

    curve, value_loss = [], None
    for row in read_rows(metrics_path):
        if row.get("kind") == "train":
            value_loss = row.get("loss/value")
        elif row.get("kind") == "eval":
            curve.append({"iteration": row["iteration"], "env_steps": row["env_steps"],
                          "reward": row["eval/episode_reward"], "value_loss": value_loss})
    return curve


def rlfit_argv(shared: dict[str, Any], seed: int, run_dir: Path, timesteps: int | None = None,
               eval_every: int | None = None) -> list[str]:
    """`rlfit train` with the shared settings' preset, steps and evaluation period."""
    return [str(RLFIT), "train", shared["env"], "--preset", shared["preset"], "--seed", str(seed),
            "--timesteps", str(timesteps or shared["num_timesteps"]),
            *(arg for item in shared.get("overrides", ()) for arg in ("--set", item)),
            "--set", f"run.eval_every={eval_every or shared['eval_every']}", "--run-dir", str(run_dir), "--quiet"]


def run_rlfit(shared: dict[str, Any], seed: int, work: Path) -> dict[str, Any]:
    """`rlfit train` on the shared settings with `seed`; its final and best eval reward and its eval curve."""
    run_dir = work / f"rlfit_seed{seed}"
    argv = rlfit_argv(shared, seed, run_dir)
    print("rlfit:", " ".join(argv), flush=True)
    result = _timed(argv, work / f"rlfit_seed{seed}.log") | {"seed": seed, "run_dir": str(run_dir)}
    summary_path = run_dir / "summary.json"
    if result["exit_code"] != 0 or not summary_path.exists():
        return result | {"error": f"exit code {result['exit_code']}; see {work / f'rlfit_seed{seed}.log'}"}
    summary = json.loads(summary_path.read_text())
    for key in ("final_eval_reward", "best_eval_reward", "env_steps", "iterations", "train_wall_s", "params_digest"):
        result[key] = summary.get(key)
    result["eval_curve"] = eval_curve(run_dir / "metrics.jsonl")
    return result


def run_brax(shared: dict[str, Any], seed: int, work: Path) -> dict[str, Any]:
    """brax_child.py (Brax's `ppo.train`) on the shared settings with `seed`; its final and best eval reward."""
    spec = brax_spec({**shared, "seed": seed})
    spec_path, out_path, log = (work / f"brax_seed{seed}_spec.json", work / f"brax_seed{seed}.json",
                                work / f"brax_seed{seed}.log")
    spec_path.write_text(json.dumps(spec, indent=2))
    argv = [str(BRAX_PYTHON), str(CHILD), str(spec_path), str(out_path)]
    print("brax:", " ".join(argv), flush=True)
    result = _timed(argv, log) | {"seed": seed}
    if result["exit_code"] != 0 or not out_path.exists():
        return result | {"error": f"exit code {result['exit_code']}; see {log}"}
    callbacks = json.loads(out_path.read_text())["callbacks"]
    rewards = [c["eval_reward"] for c in callbacks[1:] if c["eval_reward"] is not None]  # [0]: before training
    result.update(final_eval_reward=rewards[-1], best_eval_reward=max(rewards), env_steps=callbacks[-1]["step"],
                  eval_curve=[{"env_steps": c["step"], "reward": c["eval_reward"],
                               **{k: c[k] for k in c if k.startswith("training/")}} for c in callbacks])
    return result


def _timed(argv: list[str], log: Path) -> dict[str, Any]:
    load_before = load_1min()
    timed = run_timed(argv, log=log)
    return {"argv": argv, "exit_code": timed["exit_code"], "total_wall_s": timed["wall_s"],
            "total_cpu_s": timed["cpu_s"], "loadavg_1min_before": load_before, "date": machine()["date"],
            "git": git_state()}


def probe_cost(shared: dict[str, Any], work: Path) -> dict[str, Any]:
    """One short rlfit run of `env` (PROBE_ITERATIONS iterations, an evaluation after each) and its cost
    extrapolated to the shared settings' whole run (see `estimate_run_s`)."""
    run_dir = work / "probe"
    argv = rlfit_argv(shared, 0, run_dir, timesteps=PROBE_ITERATIONS * shared["steps_per_iteration"], eval_every=1)
    print("probe:", " ".join(argv), flush=True)
    result = _timed(argv, work / "probe.log")
    summary_path = run_dir / "summary.json"
    if result["exit_code"] != 0 or not summary_path.exists():
        return result | {"error": f"exit code {result['exit_code']}; see {work / 'probe.log'}"}
    from rlfit.sinks.jsonl import read_rows

    rows = list(read_rows(run_dir / "metrics.jsonl"))
    summary = json.loads(summary_path.read_text())
    iteration_s = [row["iteration_s"] for row in rows if row.get("kind") == "train"]
    evals = sum(1 for row in rows if row.get("kind") == "eval")
    measured = {"iteration_s": iteration_s, "evals": evals, "eval_s": summary.get("eval_s", 0.0),
                "compile_s": summary.get("compile_s"), "wall_s": result["total_wall_s"]}
    return result | measured | estimate_run_s(measured, shared["iterations"], shared["iterations"] // shared["eval_every"])


def estimate_run_s(measured: dict[str, Any], iterations: int, evals: int) -> dict[str, float]:
    """A whole run's seconds from a short one: its fixed cost (wall time less its iterations and evaluations),
    plus `iterations` x the median iteration after the first (the first may wait on work started before it),
    plus `evals` x its mean evaluation."""
    steps = measured["iteration_s"]
    per_iteration = statistics.median(steps[1:] or steps)
    per_eval = measured["eval_s"] / measured["evals"] if measured["evals"] else 0.0
    fixed = measured["wall_s"] - sum(steps) - measured["eval_s"]
    return {"fixed_s": round(fixed, 2), "per_iteration_s": round(per_iteration, 3), "per_eval_s": round(per_eval, 3),
            "estimated_run_s": round(fixed + iterations * per_iteration + evals * per_eval, 1)}


def suite_envs(args: argparse.Namespace, costs: dict[str, dict[str, Any]]) -> list[str]:
    """`--envs` as given, else every environment whose measured run fits `--max-run-minutes`, cheapest first."""
    if args.envs:
        return args.envs
    measured = {env: c["estimated_run_s"] for env, c in costs.items() if c.get("estimated_run_s") is not None}
    if not measured:
        user_error(f"no measured costs in {args.out}; run suite.py --time-envs first "
                         "(or name --envs)")
    return sorted((env for env, s in measured.items() if s <= args.max_run_minutes * 60), key=measured.get)


def load_record(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON so far (a new record when there is none), with this session's command, date and commit added."""
    if args.out.exists():
        record = json.loads(args.out.read_text())
    else:
        record = {"benchmark": "suite", "preset": args.preset, "overrides": args.overrides,
                  "collapse_ratio": COLLAPSE_RATIO, "notes": NOTES,
                  "sessions": [], "costs": {}, "runs": {}, "per_env": {}, "summary": {}}
    if record.get("preset") != args.preset or record.get("overrides", []) != args.overrides:
        user_error(f"{args.out} holds preset {record.get('preset')} with --set {record.get('overrides', [])}, not "
                   f"{args.preset} with {args.overrides}; pass another --out")
    from common import command_line

    record["sessions"].append({"command": command_line(), **machine(), "loadavg_1min_start": load_1min()})
    record["max_run_minutes"] = args.max_run_minutes
    return record


def pending_runs(record: dict[str, Any], envs: Sequence[str], seeds: Sequence[int],
                 brax_seeds: Sequence[int]) -> list[tuple[str, str, int]]:
    """(environment, side, seed) of every run not yet in the record (one that ended in an error is run again)."""
    def done(env: str, side: str, seed: int) -> bool:
        found = record["runs"].get(env, {}).get(side, {}).get(str(seed))
        return found is not None and "error" not in found

    return [(env, side, seed) for env in envs
            for side, side_seeds in (("rlfit", seeds), ("brax", brax_seeds)) for seed in side_seeds
            if not done(env, side, seed)]


def expected_run_s(record: dict[str, Any], env: str, side: str) -> float:
    """The longest run of this side on `env` so far, else the environment's probe estimate, else 0."""
    walls = [r["total_wall_s"] for r in record["runs"].get(env, {}).get(side, {}).values() if "error" not in r]
    if walls:
        return max(walls)
    return record["costs"].get(env, {}).get("estimated_run_s") or 0.0


def over_budget(started: float, budget_minutes: float | None, next_run_s: float) -> bool:
    """True when a run expected to take `next_run_s` would end past the budget."""
    return budget_minutes is not None and perf_counter() - started + next_run_s > budget_minutes * 60


def save(record: dict[str, Any], out: Path, commit_message: str | None) -> None:
    """Rewrites the JSON (summaries updated); with `commit_message`, commits that file alone."""
    record["per_env"] = {env: env_summary(runs) for env, runs in record["runs"].items()}
    record["summary"] = suite_summary(record["per_env"])
    record["sessions"][-1]["loadavg_1min_end"] = load_1min()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, allow_nan=False) + "\n")
    print(f"wrote {os.path.relpath(out, REPO)}", flush=True)
    if commit_message:
        commit(out, commit_message)


def commit(path: Path, message: str) -> None:
    """`git commit` of `path` and of FIGURES.md made current from it (`python -m benchmarks figures`), nothing else;
    a failure (another commit under way) is printed, and the next save retries."""
    figures = REPO / "benchmarks" / "FIGURES.md"
    subprocess.run([sys.executable, "-m", "benchmarks", "figures"], cwd=REPO, capture_output=True, text=True)
    paths = [str(path), str(figures)]
    for argv in (["git", "add", "--", *paths], ["git", "commit", "-q", "-m", message, "--", *paths]):
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"suite.py: git failed ({' '.join(argv[:2])}): {done.stderr.strip() or done.stdout.strip()}",
                  flush=True)
            return


def time_envs(args: argparse.Namespace, record: dict[str, Any], work_root: Path, started: float) -> None:
    """The probe of every environment not yet timed, within the budget."""
    for env in args.envs or args.known_envs:
        if env in record["costs"] and "error" not in record["costs"][env]:
            continue
        if over_budget(started, args.budget_minutes, 0.0):
            print(f"budget of {args.budget_minutes:g} minutes spent; {env} and after not timed", flush=True)
            break
        shared = shared_settings(env, args.preset, args.quick, args.overrides)
        work = work_root / env
        work.mkdir()
        cost = probe_cost(shared, work)
        cost["fits"] = cost.get("estimated_run_s", math.inf) <= args.max_run_minutes * 60
        record["costs"][env] = cost
        save(record, args.out, f"suite: cost of {env} measured" if args.commit else None)
    print_costs(record["costs"], args.max_run_minutes)


def run_suite(args: argparse.Namespace, record: dict[str, Any], work_root: Path, started: float) -> None:
    """Every pending run of the chosen environments, one at a time, within the budget."""
    envs = suite_envs(args, record["costs"])
    todo = pending_runs(record, envs, args.seeds, args.brax_seeds)
    print(f"{len(todo)} runs to do on {len(envs)} environments: {', '.join(envs)}", flush=True)
    shared_by_env = {env: shared_settings(env, args.preset, args.quick, args.overrides)
                     for env in dict.fromkeys(env for env, _, _ in todo)}  # resolved once, checked, then run
    for env, shared in shared_by_env.items():
        stored = record["runs"].get(env, {}).get("shared_settings")
        if stored and (changed := settings_changed(stored, shared)):
            user_error(f"{args.out}'s runs on {env} were made with other settings ({', '.join(changed)}: the preset "
                       "changed since); pass another --out")
    if any(side == "brax" for _, side, _ in todo):
        record["brax_venv"] = ensure_brax_venv()
    for env, side, seed in todo:
        if over_budget(started, args.budget_minutes, expected_run_s(record, env, side)):
            print(f"budget of {args.budget_minutes:g} minutes: {env} {side} seed {seed} (about "
                  f"{expected_run_s(record, env, side) / 60:.1f} min) would end past it; stopped", flush=True)
            break
        shared = shared_by_env[env]
        work = work_root / env
        work.mkdir(exist_ok=True)
        runs = record["runs"].setdefault(env, {"shared_settings": shared, "rlfit": {}, "brax": {}})
        runs[side][str(seed)] = (run_rlfit if side == "rlfit" else run_brax)(shared, seed, work)
        save(record, args.out, f"suite: {env} {side} seed {seed}" if args.commit else None)
    print_summary(record)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.compare:
        records = [json.loads(path.read_text()) for path in (args.out, *args.compare)]
        if args.print_only:
            print(variants_table(records))
            return
        write_variants_table(records, README)
        print(f"wrote the variants table of {README} from {', '.join(map(str, (args.out, *args.compare)))}")
        return
    if args.report:
        record = json.loads(args.out.read_text())
        if args.print_only:
            print(readme_table(record, args.known_envs))
            return
        write_readme_table(record, README, args.known_envs)
        print(f"wrote the suite table of {README} from {args.out}")
        return
    started = perf_counter()
    record = load_record(args)
    TMP.mkdir(parents=True, exist_ok=True)
    work_root = Path(tempfile.mkdtemp(prefix="suite-", dir=TMP))
    if args.time_envs:
        time_envs(args, record, work_root, started)
    else:
        run_suite(args, record, work_root, started)
    save(record, args.out, None)


NOTES = [
    "Both sides train the same iterations: the preset's run.num_timesteps rounded up to whole evaluation periods "
    "(quick: 85 iterations of 122,880 steps, 10,444,800 steps); rlfit gets them with --timesteps.",
    "Evaluation: the deterministic policy (tanh of the mean) on the preset's num_eval_envs environments, every "
    "eval_every iterations; Brax also evaluates before training (step 0), which is left out of its best.",
    "Brax: Playground's wrap_for_brax_training (a cached first state on reset), impl='jax', num_resets_per_eval=0, "
    "jax 0.9.2 in benchmarks/.venv-brax; see brax_compare.py's notes for the other differences.",
    "costs: one rlfit run of PROBE_ITERATIONS iterations with an evaluation after each, seed 0; estimated_run_s = "
    "fixed_s (its wall time less its iterations and evaluations) + iterations x per_iteration_s (median after the "
    "first) + evaluations x per_eval_s. Measured on a shared 2-core machine: see loadavg_1min_before.",
    "The suite's IQM is over environments: each environment's score is its mean final eval reward over the seeds "
    "that finished; intervals are rlfit.study.stats.interval_estimates' 95% intervals (t-based below 30 "
    "environments). The difference is rlfit minus Brax per environment (paired), and compare()'s unpaired one.",
]


if __name__ == "__main__":
    sys.exit(main())
