"""PPO's quick preset on every DM Control environment Playground registers, with Brax's PPO beside it.

For each environment: rlfit (`rlfit train ENV --preset quick`) on each of `--seeds`, and Brax's `ppo.train` at
the same settings (brax_compare.py's spec: the preset's sizes, hyperparameters and networks, deterministic
evaluation on the preset's `num_eval_envs`) on each of `--brax-seeds`, one run at a time. Both sides train
the same iterations: the preset's `run.num_timesteps` rounded up to whole evaluation periods (Brax trains whole
epochs of `eval_every` iterations), evaluating every `eval_every` iterations.

Per environment it reports rlfit's final and best eval reward per seed, whether each final is at least
`COLLAPSE_RATIO` of its own best (no collapse), and Brax's final. Across the environments it reports the IQM
of rlfit's finals and of Brax's (each environment's mean over its seeds), with stratified bootstrap intervals
from rlfit's own statistics module (`rlfit.study.stats`).

The JSON (results/suite.json, or --out) is rewritten after every run, so an interrupted suite keeps what ran.

    .venv/bin/python benchmarks/suite.py                                   # all environments, seeds 0 1, Brax 0
    .venv/bin/python benchmarks/suite.py --envs ReacherEasy --seeds 0 1 --brax-seeds 0
    .venv/bin/python benchmarks/suite.py --envs CartpoleBalance --brax-seeds   # rlfit only
    .venv/bin/python benchmarks/suite.py --quick --envs CartpoleBalance        # 2 iterations: checks the script
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from brax_compare import BRAX_PYTHON, CHILD, brax_spec, ensure_brax_venv, ppo_shared_settings
from common import RLFIT, TMP, finish_record, load_1min, print_table, run_timed, start_record

COLLAPSE_RATIO = 0.8
"""A run collapsed when its final eval reward is below this fraction of its own best."""
QUICK_ITERATIONS, QUICK_EVAL_EVERY = 2, 1


def dm_control_envs() -> list[str]:
    """Every DM Control environment Playground registers, in its order."""
    from mujoco_playground import registry

    return list(registry.dm_control_suite.ALL_ENVS)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=None, help="environments (default: every DM Control one)")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1], help="rlfit's seeds (default 0 1)")
    parser.add_argument("--brax-seeds", type=int, nargs="*", default=[0],
                        help="Brax's seeds (default 0; none: rlfit only)")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_ITERATIONS} iterations, eval every {QUICK_EVAL_EVERY}: checks the script only")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default results/suite.json; --quick: results/tmp/suite_quick.json)")
    args = parser.parse_args()
    known = dm_control_envs()
    args.envs = args.envs or known
    if unknown := [env for env in args.envs if env not in known]:
        parser.error(f"not DM Control environments: {', '.join(unknown)}; choose from {', '.join(known)}")
    return args


def shared_settings(env: str, preset: str, quick: bool) -> dict[str, Any]:
    """brax_compare's shared PPO settings for `env`, over the preset's steps rounded up to whole eval periods."""
    from rlfit.config.schema import resolve

    config = resolve(env, preset)
    p = config.ppo
    per_iteration = p.batch_size * p.num_minibatches * p.unroll_length * config.env.action_repeat
    eval_every = QUICK_EVAL_EVERY if quick else config.run.eval_every
    periods = math.ceil(config.run.num_timesteps / (per_iteration * eval_every))
    iterations = QUICK_ITERATIONS if quick else periods * eval_every
    return ppo_shared_settings(argparse.Namespace(env=env, preset=preset, seed=0, iterations=iterations,
                                                  eval_every=eval_every))


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


def run_rlfit(shared: dict[str, Any], seed: int, work: Path) -> dict[str, Any]:
    """`rlfit train` on the shared settings with `seed`; its final and best eval reward and its eval curve."""
    run_dir = work / f"rlfit_seed{seed}"
    argv = [str(RLFIT), "train", shared["env"], "--preset", shared["preset"], "--seed", str(seed),
            "--timesteps", str(shared["num_timesteps"]), "--set", f"run.eval_every={shared['eval_every']}",
            "--run-dir", str(run_dir), "--quiet"]
    print("rlfit:", " ".join(argv), flush=True)
    load_before = load_1min()
    timed = run_timed(argv, log=work / f"rlfit_seed{seed}.log")
    result = {"seed": seed, "argv": argv, "exit_code": timed["exit_code"], "total_wall_s": timed["wall_s"],
              "total_cpu_s": timed["cpu_s"], "loadavg_1min_before": load_before, "run_dir": str(run_dir)}
    summary_path = run_dir / "summary.json"
    if timed["exit_code"] != 0 or not summary_path.exists():
        result["error"] = f"exit code {timed['exit_code']}; see {work / f'rlfit_seed{seed}.log'}"
        return result
    summary = json.loads(summary_path.read_text())
    for key in ("final_eval_reward", "best_eval_reward", "env_steps", "iterations", "train_wall_s"):
        result[key] = summary.get(key)
    result["eval_curve"] = eval_curve(run_dir / "metrics.jsonl")
    return result


def run_brax(shared: dict[str, Any], seed: int, work: Path) -> dict[str, Any]:
    """brax_child.py (Brax's `ppo.train`) on the shared settings with `seed`; its final and best eval reward."""
    spec = brax_spec({**shared, "seed": seed})
    spec_path, out_path, log = work / f"brax_seed{seed}_spec.json", work / f"brax_seed{seed}.json", \
        work / f"brax_seed{seed}.log"
    spec_path.write_text(json.dumps(spec, indent=2))
    argv = [str(BRAX_PYTHON), str(CHILD), str(spec_path), str(out_path)]
    print("brax:", " ".join(argv), flush=True)
    load_before = load_1min()
    timed = run_timed(argv, log=log)
    result = {"seed": seed, "argv": argv, "exit_code": timed["exit_code"], "total_wall_s": timed["wall_s"],
              "total_cpu_s": timed["cpu_s"], "loadavg_1min_before": load_before}
    if timed["exit_code"] != 0 or not out_path.exists():
        result["error"] = f"exit code {timed['exit_code']}; see {log}"
        return result
    callbacks = json.loads(out_path.read_text())["callbacks"]
    rewards = [c["eval_reward"] for c in callbacks[1:] if c["eval_reward"] is not None]  # [0]: before training
    result.update(final_eval_reward=rewards[-1], best_eval_reward=max(rewards), env_steps=callbacks[-1]["step"],
                  eval_curve=[{"env_steps": c["step"], "reward": c["eval_reward"],
                               **{k: c[k] for k in c if k.startswith("training/")}} for c in callbacks])
    return result


def env_summary(rlfit_runs: list[dict[str, Any]], brax_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Finals, bests and the no-collapse check (final >= COLLAPSE_RATIO x best) per rlfit seed; Brax's finals."""
    done = [r for r in rlfit_runs if r.get("final_eval_reward") is not None]
    brax_done = [r for r in brax_runs if r.get("final_eval_reward") is not None]
    return {
        "rlfit_seeds": [r["seed"] for r in done],
        "rlfit_final": [r["final_eval_reward"] for r in done],
        "rlfit_best": [r["best_eval_reward"] for r in done],
        "rlfit_no_collapse": [r["final_eval_reward"] >= COLLAPSE_RATIO * r["best_eval_reward"] for r in done],
        "rlfit_final_mean": _mean([r["final_eval_reward"] for r in done]),
        "brax_seeds": [r["seed"] for r in brax_done],
        "brax_final": [r["final_eval_reward"] for r in brax_done],
        "brax_best": [r["best_eval_reward"] for r in brax_done],
        "brax_final_mean": _mean([r["final_eval_reward"] for r in brax_done]),
    }


def suite_summary(per_env: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """IQM (and mean) with 95% stratified bootstrap intervals of each side's per-environment mean finals, over
    the environments both sides finished; and whether any rlfit run collapsed."""
    import numpy as np

    from rlfit.study.stats import interval_estimates

    both = [env for env, s in per_env.items() if s["rlfit_final_mean"] is not None and s["brax_final_mean"] is not None]
    summary: dict[str, Any] = {
        "collapse_ratio": COLLAPSE_RATIO,
        "runs_collapsed": [f"{env} seed {seed}" for env, s in per_env.items()
                           for seed, ok in zip(s["rlfit_seeds"], s["rlfit_no_collapse"], strict=True) if not ok],
        "environments_compared": both,
    }
    if both:
        scores = {side: np.array([per_env[env][f"{side}_final_mean"] for env in both]) for side in ("rlfit", "brax")}
        summary["final_reward"] = {side: est._asdict() for side, est in interval_estimates(scores).items()}
        rlfit_iqm, brax_iqm = (summary["final_reward"][side]["iqm"] for side in ("rlfit", "brax"))
        summary["rlfit_iqm_at_least_brax"] = rlfit_iqm >= brax_iqm
    return summary


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def print_summary(record: dict[str, Any]) -> None:
    """One row per environment, then the suite's IQMs."""
    rows = [[env, s["rlfit_final"], s["rlfit_best"], s["rlfit_no_collapse"], s["brax_final"]]
            for env, s in record["per_env"].items()]
    print_table([[env, _cells(f), _cells(b), ok, _cells(bf)] for env, f, b, ok, bf in rows],
                ["env", "rlfit final", "rlfit best", f"final >= {COLLAPSE_RATIO} best", "brax final"])
    for side, est in record["summary"].get("final_reward", {}).items():
        print(f"{side}: IQM {est['iqm']:.1f} [{est['iqm_low']:.1f}, {est['iqm_high']:.1f}], "
              f"mean {est['mean']:.1f} [{est['mean_low']:.1f}, {est['mean_high']:.1f}] over {est['n']} environments")


def _cells(values: list[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values) or "-"


def main() -> None:
    args = parse_args()
    record = start_record("suite_quick" if args.quick else "suite")
    record.update(preset=args.preset, seeds=args.seeds, brax_seeds=args.brax_seeds, envs=args.envs,
                  collapse_ratio=COLLAPSE_RATIO, notes=NOTES, runs={}, per_env={})
    if args.brax_seeds:
        record["brax_venv"] = ensure_brax_venv()
    TMP.mkdir(parents=True, exist_ok=True)
    work_root = Path(tempfile.mkdtemp(prefix="suite-", dir=TMP))
    for env in args.envs:
        shared = shared_settings(env, args.preset, args.quick)
        work = work_root / env
        work.mkdir()
        runs = record["runs"][env] = {"shared_settings": shared, "rlfit": [], "brax": []}
        for seed in args.seeds:
            runs["rlfit"].append(run_rlfit(shared, seed, work))
            _save(record, runs, env, args.out)
        for seed in args.brax_seeds:
            runs["brax"].append(run_brax(shared, seed, work))
            _save(record, runs, env, args.out)
    print_summary(record)


def _save(record: dict[str, Any], runs: dict[str, Any], env: str, out: Path | None) -> None:
    """Updates the summaries and rewrites the JSON (an interrupted suite keeps the runs done)."""
    record["per_env"][env] = env_summary(runs["rlfit"], runs["brax"])
    record["summary"] = suite_summary(record["per_env"])
    finish_record(record, out)


NOTES = [
    "Both sides train the same iterations: the preset's run.num_timesteps rounded up to whole evaluation periods "
    "(quick: 85 iterations of 122,880 steps, 10,444,800 steps); rlfit gets them with --timesteps.",
    "Evaluation: the deterministic policy (tanh of the mean) on the preset's num_eval_envs environments, every "
    "eval_every iterations; Brax also evaluates before training (step 0), which is left out of its best.",
    "Brax: Playground's wrap_for_brax_training (a cached first state on reset), impl='jax', num_resets_per_eval=0, "
    "jax 0.9.2 in benchmarks/.venv-brax; see brax_compare.py's notes for the other differences.",
    "The suite's IQM is over environments: each environment's score is its mean final eval reward over the seeds "
    "that finished; intervals are rlfit.study.stats.interval_estimates' 95% intervals (t-based below 30 seeds, BCa from 30).",
]


if __name__ == "__main__":
    main()
