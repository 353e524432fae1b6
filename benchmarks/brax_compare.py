"""rlfit against Brax's PPO or SAC trainer on the same environment and hyperparameters (rlfit's quick preset).

Brax 0.14.2's trainers need jax 0.9.x (they call `jax.device_put_replicated`, removed in jax 0.10), so Brax
runs in its own venv, `benchmarks/.venv-brax`, created here from `brax-requirements.txt` when missing.

PPO (`--algo ppo`, the default). Both trainers get: the preset's sizes and PPO hyperparameters, policy/value
networks, episode length 1000, `iterations` iterations of `batch_size * num_minibatches * unroll_length`
steps, an evaluation every `eval_every` iterations on `num_eval_envs` environments with the deterministic
policy, a cold compile cache, the same seed. Brax: Playground's `wrap_for_brax_training`, `impl='jax'`,
`num_resets_per_eval=0` (so Brax's `training/sps` is not multiplied by resets), `num_evals = iterations /
eval_every + 1` (Brax also evaluates before training). Each side is a subprocess; its wall clock includes
imports and compilation.

SAC (`--algo sac`). The same, with the preset's SAC sizes and hyperparameters, the same policy and Q networks,
a prefill of `min_replay_size` random-action transitions, then `iterations` iterations of `num_envs *
policy_steps_per_iteration` steps (Brax: epochs of `eval_every * policy_steps_per_iteration` training steps),
for each of `--seeds`, Brax and rlfit back to back per seed. Brax counts its prefill in `num_timesteps` and
in its steps, rlfit does not: Brax gets `num_timesteps = prefill + iterations * steps per iteration`, and
steps are reported as rlfit counts them (after the prefill). See SAC_NOTES for the differences that remain.

    .venv/bin/python benchmarks/brax_compare.py            # PPO: 50 iterations (6.1M steps) each
    .venv/bin/python benchmarks/brax_compare.py --quick    # PPO: 4 iterations each: checks the script only
    .venv/bin/python benchmarks/brax_compare.py --algo sac --env CartpoleBalance   # 395 iterations, seeds 0 1 2
    .venv/bin/python benchmarks/brax_compare.py --algo sac --env ReacherEasy --quick   # 12 iterations, seed 0
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import (BENCH_DIR, REPO, RLFIT, TMP, finish_record, fresh_cache_env, load_1min, print_table, run_timed,
                    start_record)


BRAX_VENV = BENCH_DIR / ".venv-brax"
BRAX_PYTHON = BRAX_VENV / "bin" / "python"
REQUIREMENTS = BENCH_DIR / "brax-requirements.txt"
CHILD = BENCH_DIR / "brax_child.py"
PPO_KEYS = ("num_envs", "batch_size", "num_minibatches", "unroll_length", "num_updates_per_batch", "learning_rate",
            "entropy_cost", "discounting", "gae_lambda", "clipping_epsilon", "reward_scaling",
            "normalize_observations", "normalize_advantage")


SAC_KEYS = ("num_envs", "batch_size", "learning_rate", "discounting", "tau", "reward_scaling",
            "normalize_observations", "min_replay_size", "max_replay_size", "grad_updates_per_step")
SAC_DEFAULT_SEEDS = [0, 1, 2]
SPS_RATIO_TARGET = 1.3


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", choices=("ppo", "sac"), default="ppo", help="which trainers to compare")
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--iterations", type=int, default=None, help="training iterations for both (a multiple of "
                        "--eval-every). Default PPO: 50 (the quick preset's 6M steps are 49 iterations, Brax needs "
                        "whole epochs); SAC: the preset's num_timesteps rounded up to whole evaluation periods")
    parser.add_argument("--eval-every", type=int, default=None, help="default: the preset's run.eval_every")
    parser.add_argument("--seed", type=int, default=None, help="PPO: the seed (default 0); SAC: as --seeds SEED")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help=f"SAC only: the seeds, each run on both sides (default {SAC_DEFAULT_SEEDS}; --quick: 0)")
    parser.add_argument("--sides", nargs="+", choices=("brax", "rlfit"), default=["brax", "rlfit"],
                        help="which trainers to run (default both)")
    parser.add_argument("--quick", action="store_true", help="PPO: 4 iterations, eval every 2; SAC: 12 "
                        "iterations, eval every 2, one seed: a check, not a result")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default results/brax_compare.json, "
                        "SAC: results/brax_compare_sac_<env>.json; --quick: results/tmp/...)")
    args = parser.parse_args()
    if args.algo == "ppo":
        if args.seeds is not None:
            parser.error("--seeds is for --algo sac; PPO runs one --seed")
        args.seed = 0 if args.seed is None else args.seed
        args.iterations = 50 if args.iterations is None else args.iterations
    else:
        fallback = [args.seed] if args.seed is not None else [0] if args.quick else SAC_DEFAULT_SEEDS
        args.seeds = args.seeds or fallback
    if args.quick:
        args.iterations, args.eval_every = (4, 2) if args.algo == "ppo" else (12, 2)
    return args


def ensure_brax_venv() -> dict[str, Any]:
    """Creates benchmarks/.venv-brax from brax-requirements.txt unless it already imports Brax on jax 0.9."""
    check = [str(BRAX_PYTHON), "-c", "import jax, brax, mujoco_playground; assert jax.__version__.startswith('0.9')"]
    if BRAX_PYTHON.exists() and subprocess.call(check, stderr=subprocess.DEVNULL) == 0:
        return {"created": False}
    print(f"creating {BRAX_VENV} (pip, a few minutes) ...", flush=True)
    started = time.perf_counter()
    subprocess.check_call([sys.executable, "-m", "venv", "--clear", str(BRAX_VENV)])
    subprocess.check_call([str(BRAX_PYTHON), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)])
    subprocess.check_call(check)
    return {"created": True, "install_s": round(time.perf_counter() - started, 1)}


def ppo_shared_settings(args: argparse.Namespace, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The PPO settings both trainers get, read from rlfit's resolved config for the preset (with `overrides`,
    `section.key=value` strings as for `--set`)."""
    from rlfit.config.schema import resolve

    config = resolve(args.env, args.preset, overrides=[f"run.seed={args.seed}", *overrides])
    eval_every = args.eval_every or config.run.eval_every
    if args.iterations % eval_every:
        raise SystemExit(f"--iterations ({args.iterations}) must be a multiple of eval_every ({eval_every})")
    p = config.ppo
    steps_per_iteration = p.batch_size * p.num_minibatches * p.unroll_length * config.env.action_repeat
    return {
        "env": args.env, "preset": args.preset, "seed": args.seed, "eval_every": eval_every,
        "iterations": args.iterations,
        "num_timesteps": steps_per_iteration * args.iterations, "steps_per_iteration": steps_per_iteration,
        "ppo": {key: getattr(p, key) for key in PPO_KEYS},
        "max_grad_norm": p.max_grad_norm or None,
        "policy_hidden": list(config.ppo.policy_hidden), "value_hidden": list(config.ppo.value_hidden),
        "activation": config.ppo.activation,
        "episode_length": config.env.episode_length, "action_repeat": config.env.action_repeat,
        "num_eval_envs": config.run.num_eval_envs,
    }


def brax_spec(shared: dict[str, Any]) -> dict[str, Any]:
    """`ppo.train` keyword arguments for the shared settings (see brax_child.py)."""
    assert shared["activation"] == "swish", "Brax's make_ppo_networks default activation is swish"
    return {"env": shared["env"], "seed": shared["seed"], "ppo": {
        **shared["ppo"], "max_grad_norm": shared["max_grad_norm"],
        "policy_hidden": shared["policy_hidden"], "value_hidden": shared["value_hidden"],
        "num_timesteps": shared["num_timesteps"], "episode_length": shared["episode_length"],
        "action_repeat": shared["action_repeat"], "num_resets_per_eval": 0,
        "num_evals": shared["iterations"] // shared["eval_every"] + 1,
        "num_eval_envs": shared["num_eval_envs"], "deterministic_eval": True,
    }}


def sac_shared_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The SAC settings both trainers get (all but the seed), read from rlfit's resolved config for the preset.

    Brax's `sac.train` fixes what rlfit's config leaves open (see `brax_sac_mismatches`); the config must match.
    """
    from rlfit.config.schema import resolve

    config = resolve(args.env, args.preset, overrides=["algo=sac"])
    s, repeat = config.sac, config.env.action_repeat
    if mismatches := brax_sac_mismatches(s):
        raise SystemExit(f"Brax's sac.train cannot reproduce this config: {'; '.join(mismatches)}")
    eval_every = args.eval_every or config.run.eval_every
    steps_per_iteration = s.num_envs * s.policy_steps_per_iteration * repeat
    period = eval_every * steps_per_iteration
    iterations = args.iterations or -(-config.run.num_timesteps // period) * eval_every
    if iterations % eval_every:
        raise SystemExit(f"--iterations ({iterations}) must be a multiple of eval_every ({eval_every})")
    return {
        "algo": "sac", "env": args.env, "preset": args.preset, "eval_every": eval_every, "iterations": iterations,
        "num_timesteps": steps_per_iteration * iterations, "steps_per_iteration": steps_per_iteration,
        "prefill_steps": -(-s.min_replay_size // s.num_envs) * s.num_envs * repeat,
        "sac": {key: getattr(s, key) for key in SAC_KEYS},
        "policy_steps_per_iteration": s.policy_steps_per_iteration,
        "policy_hidden": list(s.policy_hidden), "q_hidden": list(s.q_hidden), "q_layer_norm": s.q_layer_norm,
        "activation": s.activation, "alpha_learning_rate": s.alpha_learning_rate, "target_entropy": "-0.5 * A",
        "episode_length": config.env.episode_length, "action_repeat": repeat,
        "num_eval_envs": config.run.num_eval_envs,
    }


def brax_sac_mismatches(sac: Any) -> list[str]:
    """What in rlfit's SAC config Brax's `sac.train` cannot take: it fixes alpha's Adam step size at 3e-4, the
    target entropy at -0.5 * action size, and brax_child.py's networks use relu (Brax's default)."""
    found = []
    if sac.alpha_learning_rate != 3e-4:
        found.append(f"sac.alpha_learning_rate is {sac.alpha_learning_rate}, Brax uses 3e-4")
    if sac.target_entropy is not None:
        found.append(f"sac.target_entropy is {sac.target_entropy}, Brax uses -0.5 * action size")
    if sac.activation != "relu":
        found.append(f"sac.activation is {sac.activation}, the Brax side uses relu")
    return found


def sac_brax_spec(shared: dict[str, Any]) -> dict[str, Any]:
    """`sac.train` keyword arguments (and network sizes, see brax_child.py) for the shared SAC settings.

    Brax's `num_timesteps` includes its prefill; each of its `num_evals - 1` epochs then trains
    ceil((num_timesteps - prefill) / (num_evals - 1) / num_envs) = eval_every * policy_steps_per_iteration
    actor steps, so both sides train the same steps and evaluate at the same points.
    """
    return {"env": shared["env"], "seed": shared["seed"], "sac": {
        **shared["sac"], "policy_hidden": shared["policy_hidden"], "q_hidden": shared["q_hidden"],
        "q_layer_norm": shared["q_layer_norm"],
        "num_timesteps": shared["prefill_steps"] + shared["num_timesteps"],
        "episode_length": shared["episode_length"], "action_repeat": shared["action_repeat"],
        "num_evals": shared["iterations"] // shared["eval_every"] + 1,
        "num_eval_envs": shared["num_eval_envs"], "deterministic_eval": True,
    }}


def run_brax(spec: dict[str, Any], work: Path, prefill_steps: int = 0) -> dict[str, Any]:
    """Runs brax_child.py on `spec` in the Brax venv; derives compile time and honest env-steps/s from its
    callbacks (`prefill_steps`: see `brax_figures`)."""
    (work / "brax_spec.json").write_text(json.dumps(spec, indent=2))
    argv = [str(BRAX_PYTHON), str(CHILD), str(work / "brax_spec.json"), str(work / "brax_out.json")]
    print("brax:", " ".join(argv), flush=True)
    load_before = load_1min()
    timed = run_timed(argv, env=log_compiles_env(), log=work / "brax.log")
    result = {"argv": argv, "exit_code": timed["exit_code"], "total_wall_s": timed["wall_s"],
              "total_cpu_s": timed["cpu_s"], "loadavg_1min_before": load_before, "loadavg_1min_after": load_1min(),
              "spec": spec, "log": str(work / "brax.log")}
    if timed["exit_code"] != 0:
        return result
    out = json.loads((work / "brax_out.json").read_text())
    result.update(out)
    result.update(brax_figures(out["callbacks"], prefill_steps))
    result.update(xla_compiles(work / "brax.log"))
    return result


def brax_figures(callbacks: list[dict[str, Any]], prefill_steps: int = 0) -> dict[str, Any]:
    """From Brax's progress callbacks (first: the eval before training; then one per epoch of training).

    Warm-up epochs are the leading epochs that took over 1.5x the median epoch (they compile; on jax 0.9.2
    Brax compiles its training epoch and evaluator twice, in epochs 1 and 2). The window after them is
    compile-free: honest env-steps/s = its steps / its wall time (evaluations included, as in rlfit's
    sps_mean); train-only = its steps / Brax's own training walltime over it. Brax's SAC counts its replay
    prefill in its steps: `prefill_steps` is subtracted, so steps count as rlfit's do (after the prefill).
    """
    times = [c["t_s"] for c in callbacks]
    steps = [c["step"] for c in callbacks]
    epochs = [b - a for a, b in itertools.pairwise(times)]
    steady = statistics.median(epochs)
    warm = 1
    while warm < len(epochs) - 1 and epochs[warm] > 1.5 * steady:
        warm += 1
    first, last = callbacks[warm], callbacks[-1]
    reported = [c["brax_training_sps"] for c in callbacks[warm + 1:]]
    window_steps, window_s = last["step"] - first["step"], last["t_s"] - first["t_s"]
    honest = window_steps / window_s
    honest_train_only = window_steps / (last["brax_training_walltime"] - first["brax_training_walltime"])
    return {
        "time_to_first_progress_s": times[0],
        "time_to_first_training_progress_s": times[1],
        "epoch_s": epochs,
        "epoch_s_median": steady,
        "warmup_epochs": warm,
        "warmup_extra_s": sum(e - steady for e in epochs[:warm]),
        "env_steps": steps[-1] - prefill_steps,
        **({"env_steps_with_prefill": steps[-1]} if prefill_steps else {}),
        "window": f"steps {first['step'] - prefill_steps:,} -> {last['step'] - prefill_steps:,} "
                  f"(after {warm} warm-up epoch(s))",
        "window_start_step": first["step"] - prefill_steps,
        "honest_sps_after_compile": honest,
        "honest_train_only_sps_after_compile": honest_train_only,
        "brax_reported_sps_mean_after_warmup": statistics.mean(reported),
        "brax_reported_sps_by_epoch": [c["brax_training_sps"] for c in callbacks[1:]],
        "reported_over_honest_train_only": statistics.mean(reported) / honest_train_only,
        "reported_over_honest": statistics.mean(reported) / honest,
        "window_cpu_per_wall": (last["cpu_s"] - first["cpu_s"]) / window_s,
    }


def run_rlfit(shared: dict[str, Any], work: Path, window_start_step: int) -> dict[str, Any]:
    """Runs `rlfit train` (the algorithm, preset, aligned length and eval period) with a cold compile cache."""
    algo = ["--algo", shared["algo"]] if "algo" in shared else []  # PPO: rlfit's default, left implicit
    argv = [str(RLFIT), "train", shared["env"], *algo, "--preset", shared["preset"],
            "--timesteps", str(shared["num_timesteps"]), "--seed", str(shared["seed"]),
            "--set", f"run.eval_every={shared['eval_every']}", "--run-dir", str(work / "rlfit_run")]
    print("rlfit:", " ".join(argv), flush=True)
    load_before = load_1min()
    env = {**fresh_cache_env(work / "rlfit_cache"), **log_compiles_env()}
    timed = run_timed(argv, env=env, log=work / "rlfit.log")
    result = {"argv": argv, "exit_code": timed["exit_code"], "total_wall_s": timed["wall_s"],
              "total_cpu_s": timed["cpu_s"], "loadavg_1min_before": load_before, "loadavg_1min_after": load_1min(),
              "log": str(work / "rlfit.log")}
    if timed["exit_code"] != 0:
        return result
    summary = json.loads((work / "rlfit_run" / "summary.json").read_text())
    for key in ("final_eval_reward", "compile_s", "train_wall_s", "eval_s", "sps_mean", "env_steps", "versions"):
        result[key] = summary[key]
    start_iteration = window_start_step // shared["steps_per_iteration"]
    result.update(rlfit_window(work / "rlfit_run" / "metrics.jsonl", start_iteration, summary["train_wall_s"]))
    result.update(xla_compiles(work / "rlfit.log"))
    return result


def rlfit_window(metrics_path: Path, start_iteration: int, train_wall_s: float) -> dict[str, Any]:
    """rlfit's env-steps/s over the same window as Brax's: after `start_iteration` iterations and their eval."""
    from rlfit.sinks.jsonl import read_rows

    train = {r["iteration"]: r for r in read_rows(metrics_path) if r.get("kind") == "train"}
    after = train[start_iteration + 1]
    window_start_s = after["wall_s"] - after["iteration_s"]  # just after the eval of start_iteration
    window_steps = train[max(train)]["env_steps"] - train[start_iteration]["env_steps"]
    iteration_s = sum(r["iteration_s"] for i, r in train.items() if i > start_iteration)
    return {"honest_sps_after_compile": window_steps / (train_wall_s - window_start_s),
            "honest_train_only_sps_after_compile": window_steps / iteration_s,
            "window": f"steps {train[start_iteration]['env_steps']:,} -> {train[max(train)]['env_steps']:,}"}


def log_compiles_env() -> dict[str, str]:
    """The environment with JAX_LOG_COMPILES=1: JAX then logs every XLA compilation and its duration."""
    return {**os.environ, "JAX_LOG_COMPILES": "1"}


def xla_compiles(log: Path) -> dict[str, Any]:
    """Total XLA compile seconds from JAX's 'Finished XLA compilation of NAME in T sec' lines, and those > 1 s."""
    found = [(m[1], float(m[2])) for m in COMPILE_LINE.finditer(log.read_text())]
    return {"xla_compile_s_total": round(sum(t for _, t in found), 2), "xla_compiles": len(found),
            "xla_compiles_over_1s": [[name, round(t, 2)] for name, t in found if t > 1.0]}


COMPILE_LINE = re.compile(r"Finished XLA compilation of (\S+) in ([0-9.]+) sec")


def run_pair(shared: dict[str, Any], spec: dict[str, Any], work: Path, sides: list[str],
             prefill_steps: int = 0) -> dict[str, Any]:
    """Brax's trainer on `spec`, then `rlfit train` on `shared` (those in `sides`), in `work`.

    rlfit's env-steps/s is measured over the same compile-free window as Brax's (without Brax: after the first
    evaluation period).
    """
    work.mkdir(parents=True, exist_ok=True)
    pair: dict[str, Any] = {}
    if "brax" in sides:
        pair["brax"] = run_brax(spec, work, prefill_steps)
    if "rlfit" in sides:
        default_start = shared["eval_every"] * shared["steps_per_iteration"]
        pair["rlfit"] = run_rlfit(shared, work, pair.get("brax", {}).get("window_start_step", default_start))
    return pair


def print_pair(pair: dict[str, Any]) -> None:
    """The figures of one Brax/rlfit pair side by side."""
    brax, rlfit = pair.get("brax", {}), pair.get("rlfit", {})
    print_table([[k, brax.get(k), rlfit.get(k)] for k in TABLE_KEYS], ["figure", "brax", "rlfit"])


TABLE_KEYS = ["final_eval_reward", "env_steps", "total_wall_s", "total_cpu_s", "xla_compile_s_total", "compile_s",
              "warmup_extra_s", "time_to_first_progress_s", "window", "honest_sps_after_compile",
              "honest_train_only_sps_after_compile", "brax_reported_sps_mean_after_warmup", "sps_mean",
              "loadavg_1min_before"]


def new_work_dir(prefix: str) -> Path:
    """A fresh directory under results/tmp/ for one invocation's run directories, specs and logs."""
    TMP.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=TMP))


def main_ppo(args: argparse.Namespace) -> None:
    """One seed of Brax's `ppo.train` and rlfit's PPO; results/brax_compare.json."""
    record = start_record("brax_compare_quick" if args.quick else "brax_compare")
    shared = ppo_shared_settings(args)
    work = new_work_dir("brax_compare-")
    record["shared_settings"] = shared
    if "brax" in args.sides:
        record["brax_venv"] = ensure_brax_venv()
    record.update(run_pair(shared, brax_spec(shared), work, args.sides))
    record["notes"] = NOTES
    print_pair(record)
    finish_record(record, args.out)


def main_sac(args: argparse.Namespace) -> None:
    """Each seed of Brax's `sac.train` and rlfit's SAC, back to back; results/brax_compare_sac_<env>.json,
    rewritten after every seed (an interrupted run keeps the seeds done)."""
    name = f"brax_compare_sac_{args.env}" + ("_quick" if args.quick else "")
    record = start_record(name)
    shared = sac_shared_settings(args)
    record["shared_settings"] = shared
    if "brax" in args.sides:
        record["brax_venv"] = ensure_brax_venv()
    work = new_work_dir(f"{name}-")
    record["runs"] = []
    for seed in args.seeds:
        print(f"\n=== {args.env}, seed {seed} ===", flush=True)
        seeded = {**shared, "seed": seed}
        pair = run_pair(seeded, sac_brax_spec(seeded), work / f"seed{seed}", args.sides, shared["prefill_steps"])
        record["runs"].append({"seed": seed, **pair})
        print_pair(pair)
        record["summary"] = sac_summary(record["runs"])
        record["notes"] = SAC_NOTES
        out = finish_record(record, args.out)
    print(f"\n{args.env}, seeds {args.seeds}:")
    print_summary(record["summary"])
    print(f"wrote {os.path.relpath(out, REPO)}")


SUMMARY_KEYS = ("final_eval_reward", "honest_sps_after_compile", "honest_train_only_sps_after_compile",
                "xla_compile_s_total", "compile_s", "warmup_extra_s", "total_wall_s", "total_cpu_s")


def spread(values: list[float]) -> dict[str, Any] | None:
    """The values per seed with their mean, sample standard deviation (0 for one seed), min and max."""
    if not values:
        return None
    return {"per_seed": values, "mean": statistics.mean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0, "min": min(values), "max": max(values)}


def sac_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per side, the spread over seeds of each SUMMARY_KEYS figure; with both sides, the verdict."""
    summary: dict[str, Any] = {"seeds": [run["seed"] for run in runs]}
    for side in ("brax", "rlfit"):
        summary[side] = {key: spread([run[side][key] for run in runs if run.get(side, {}).get(key) is not None])
                         for key in SUMMARY_KEYS}
    paired = [run for run in runs if all(run.get(side, {}).get("honest_sps_after_compile") for side in
                                         ("brax", "rlfit"))]
    if paired:
        summary["verdict"] = sac_verdict(summary["brax"], summary["rlfit"], paired)
    return summary


def sac_verdict(brax: dict[str, Any], rlfit: dict[str, Any], paired: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's two checks: rlfit's mean final reward at least Brax's minus Brax's seed-to-seed standard
    deviation (the noise), and rlfit's honest env-steps/s (after compile) at least SPS_RATIO_TARGET x Brax's."""
    reward_b, reward_r = brax["final_eval_reward"], rlfit["final_eval_reward"]
    standard_error = math.sqrt(reward_b["std"] ** 2 / len(reward_b["per_seed"])
                               + reward_r["std"] ** 2 / len(reward_r["per_seed"]))
    ratio = rlfit["honest_sps_after_compile"]["mean"] / brax["honest_sps_after_compile"]["mean"]
    train_only = (rlfit["honest_train_only_sps_after_compile"]["mean"]
                  / brax["honest_train_only_sps_after_compile"]["mean"])
    return {
        "reward_rlfit_minus_brax": reward_r["mean"] - reward_b["mean"],
        "reward_noise_brax_seed_std": reward_b["std"],
        "reward_difference_standard_error": standard_error,
        "reward_at_least_brax_minus_noise": reward_r["mean"] >= reward_b["mean"] - reward_b["std"],
        "sps_ratio": ratio,
        "sps_ratio_train_only": train_only,
        "sps_ratio_per_seed": [round(run["rlfit"]["honest_sps_after_compile"]
                                     / run["brax"]["honest_sps_after_compile"], 3) for run in paired],
        "sps_ratio_target": SPS_RATIO_TARGET,
        "sps_ratio_met": ratio >= SPS_RATIO_TARGET,
    }


def print_summary(summary: dict[str, Any]) -> None:
    """Mean +- std [min, max] over seeds per side, then the verdict."""
    def cell(found: dict[str, Any] | None) -> str:
        if found is None:
            return "-"
        return f"{found['mean']:,.1f} +- {found['std']:,.1f} [{found['min']:,.1f}, {found['max']:,.1f}]"

    print_table([[key, cell(summary["brax"][key]), cell(summary["rlfit"][key])] for key in SUMMARY_KEYS],
                ["figure (over seeds)", "brax", "rlfit"])
    if "verdict" in summary:
        print()
        print_table(list(summary["verdict"].items()), ["verdict", "value"])


def main() -> None:
    args = parse_args()
    if args.algo == "sac":
        main_sac(args)
    else:
        main_ppo(args)


NOTES = [
    "num_resets_per_eval=0 for Brax: its training/sps is multiplied by max(num_resets_per_eval, 1), so with "
    "Playground's published value (10) it would report 10x the steps actually run per epoch.",
    "Brax's training/sps excludes evaluation time and includes compilation in the epochs that compile; "
    "honest_sps_after_compile counts evaluations (like rlfit's sps_mean) over the compile-free window "
    "(after Brax's warm-up epochs; rlfit over the same steps); honest_train_only_sps_after_compile excludes "
    "them (Brax: its training/walltime; rlfit: the sum of iteration_s).",
    "xla_compile_s_total: the sum of JAX's own 'Finished XLA compilation' times (JAX_LOG_COMPILES=1), the same "
    "measure for both; rlfit's compile_s is its ahead-of-time compile of the iteration and evaluator.",
    "Brax evaluates once more than rlfit (before training, step 0).",
    "Brax's auto-reset (Playground's BraxAutoResetWrapper, full_reset=False) restores a cached first state; "
    "rlfit resets each finished environment with its own key.",
    "Brax (bootstrap_on_timeout=False, its default) masks the GAE error at time-limit steps, as rlfit's default "
    "estimator (ppo.advantages: brax) does; rlfit's gae_once bootstraps from the value of the reached observation. "
    "CartpoleBalance has no terminal states; truncations come every 1000 steps.",
    "Brax runs on jax/jaxlib 0.9.2, rlfit on the main venv's jax; their XLA versions differ.",
    "total_cpu_s: user + system CPU seconds of the subprocess; less sensitive than wall time to other load.",
]


SAC_NOTES = [
    "Steps count as rlfit counts them: after the replay prefill of min_replay_size random-action transitions "
    "(rounded up to whole steps of num_envs environments), which both sides collect. Brax counts the prefill in "
    "num_timesteps and in its progress steps (env_steps_with_prefill); it was subtracted everywhere else.",
    "Networks: Brax's make_sac_networks takes one hidden_layer_sizes for the policy and the Q networks, so "
    "brax_child.py calls it twice (policy from one call, Q networks from the other): both sides train the "
    "preset's policy and Q (2 critics) relu MLPs, lecun_uniform kernels, tanh-Gaussian policy "
    "(softplus scale + 0.001).",
    "Q LayerNorm (q_layer_norm, Playground's published setting): Brax applies it after the activation "
    "(Dense -> relu -> LayerNorm), rlfit before (Dense -> LayerNorm -> relu).",
    "Time limits: Brax multiplies the critic error of truncated transitions by 0 (they teach nothing); rlfit keeps "
    "them and bootstraps from the observation reached before the reset.",
    "Alpha loss: Brax alpha * sg(-log pi - target_entropy), rlfit -log_alpha * sg(log pi + target_entropy): the "
    "same direction, Brax's gradient with respect to log_alpha scaled by alpha.",
    "Sampling: Brax samples a policy step's batches after inserting that step's transitions; rlfit samples them "
    "before (a transition is first sampled one policy step later).",
    "honest_sps_after_compile: steps / wall time over the compile-free window after Brax's warm-up epochs "
    "(epochs over 1.5x the median; the first also holds the prefill), evaluations included; rlfit over the same "
    "steps. honest_train_only_sps_after_compile leaves evaluations out (Brax: differences of its "
    "training/walltime, which starts with the prefill; rlfit: the sum of iteration_s).",
    "Brax's SAC training/sps is env steps of the epoch / epoch time (no reset multiplier, unlike PPO's); it "
    "includes compilation in the epochs that compile and leaves evaluation out.",
    "Brax evaluates once more than rlfit (before the prefill and training, step 0).",
    "rlfit writes checkpoints (every run.save_interval iterations and at the end, replay buffer included) inside "
    "its timed window; Brax writes none. honest_sps_after_compile pays for them, the training-only figure not.",
    "Brax's auto-reset (Playground's BraxAutoResetWrapper, full_reset=False) restores a cached first state; "
    "rlfit resets each finished environment with its own key.",
    "Verdict: reward_at_least_brax_minus_noise compares the mean final eval rewards with Brax's seed-to-seed "
    "standard deviation as the noise; reward_difference_standard_error is the standard error of the difference "
    "of the means. sps_ratio is rlfit's mean honest_sps_after_compile over Brax's (target 1.3); per seed, each "
    "pair ran back to back.",
    "Brax runs on jax/jaxlib 0.9.2, rlfit on the main venv's jax; their XLA versions differ.",
]


if __name__ == "__main__":
    main()
