"""rlfit against Brax's PPO trainer on the same environment and hyperparameters (rlfit's quick preset).

Brax 0.14.2's `ppo.train` needs jax 0.9.x (it calls `jax.device_put_replicated`, removed in jax 0.10), so
it runs in its own venv, `benchmarks/.venv-brax`, created here from `brax-requirements.txt` when missing.

Both trainers get: the preset's sizes and PPO hyperparameters, policy/value networks, episode length 1000,
`iterations` iterations of `batch_size * num_minibatches * unroll_length` steps, an evaluation every
`eval_every` iterations on `num_eval_envs` environments with the deterministic policy, a cold compile
cache, the same seed. Brax: Playground's `wrap_for_brax_training`, `impl='jax'`, `num_resets_per_eval=0`
(so Brax's `training/sps` is not multiplied by resets), `num_evals = iterations / eval_every + 1` (Brax also
evaluates before training). Each side is a subprocess; its wall clock includes imports and compilation.

    .venv/bin/python benchmarks/brax_compare.py            # 50 iterations (6.1M steps) each
    .venv/bin/python benchmarks/brax_compare.py --quick    # 4 iterations each: checks the script only
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (BENCH_DIR, RLFIT, TMP, finish_record, fresh_cache_env, load_1min, print_table, run_timed,
                    start_record)


BRAX_VENV = BENCH_DIR / ".venv-brax"
BRAX_PYTHON = BRAX_VENV / "bin" / "python"
REQUIREMENTS = BENCH_DIR / "brax-requirements.txt"
CHILD = BENCH_DIR / "brax_child.py"
PPO_KEYS = ("num_envs", "batch_size", "num_minibatches", "unroll_length", "num_updates_per_batch", "learning_rate",
            "entropy_cost", "discounting", "gae_lambda", "clipping_epsilon", "reward_scaling",
            "normalize_observations", "normalize_advantage")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--iterations", type=int, default=50, help="training iterations for both (a multiple of "
                        "--eval-every; the quick preset's 6M steps are 49 iterations, Brax needs whole epochs)")
    parser.add_argument("--eval-every", type=int, default=None, help="default: the preset's run.eval_every")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", nargs="+", choices=("brax", "rlfit"), default=["brax", "rlfit"],
                        help="which trainers to run (default both)")
    parser.add_argument("--quick", action="store_true", help="4 iterations, eval every 2: a check, not a result")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default results/brax_compare.json; --quick: results/tmp/...)")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.eval_every = 4, 2
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


def shared_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings both trainers get, read from rlfit's resolved config for the preset."""
    from rlfit.config import resolve

    config = resolve(args.env, args.preset, overrides=[f"run.seed={args.seed}"])
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
        "policy_hidden": list(config.network.policy_hidden), "value_hidden": list(config.network.value_hidden),
        "activation": config.network.activation,
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


def run_brax(shared: dict[str, Any], work: Path) -> dict[str, Any]:
    """Runs brax_child.py in the Brax venv and derives compile time and honest env-steps/s from its callbacks."""
    spec = brax_spec(shared)
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
    result.update(brax_figures(out["callbacks"]))
    result.update(xla_compiles(work / "brax.log"))
    return result


def brax_figures(callbacks: list[dict[str, Any]]) -> dict[str, Any]:
    """From Brax's progress callbacks (first: the eval before training; then one per epoch of training).

    Warm-up epochs are the leading epochs that took over 1.5x the median epoch (they compile; on jax 0.9.2
    Brax compiles its training epoch and evaluator twice, in epochs 1 and 2). The window after them is
    compile-free: honest env-steps/s = its steps / its wall time (evaluations included, as in rlfit's
    sps_mean); train-only = its steps / Brax's own training walltime over it.
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
        "env_steps": steps[-1],
        "window": f"steps {first['step']:,} -> {last['step']:,} (after {warm} warm-up epoch(s))",
        "window_start_step": first["step"],
        "honest_sps_after_compile": honest,
        "honest_train_only_sps_after_compile": honest_train_only,
        "brax_reported_sps_mean_after_warmup": statistics.mean(reported),
        "brax_reported_sps_by_epoch": [c["brax_training_sps"] for c in callbacks[1:]],
        "reported_over_honest_train_only": statistics.mean(reported) / honest_train_only,
        "reported_over_honest": statistics.mean(reported) / honest,
        "window_cpu_per_wall": (last["cpu_s"] - first["cpu_s"]) / window_s,
    }


def run_rlfit(shared: dict[str, Any], work: Path, window_start_step: int) -> dict[str, Any]:
    """Runs `rlfit train` (the preset, aligned length and eval period) with a cold compile cache."""
    argv = [str(RLFIT), "train", shared["env"], "--preset", shared["preset"],
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


def main() -> None:
    args = parse_args()
    record = start_record("brax_compare_quick" if args.quick else "brax_compare")
    shared = shared_settings(args)
    TMP.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="brax_compare-", dir=TMP))
    record["shared_settings"] = shared
    if "brax" in args.sides:
        record["brax_venv"] = ensure_brax_venv()
        record["brax"] = run_brax(shared, work)
    if "rlfit" in args.sides:
        # The same compile-free window as Brax's (default: after the first evaluation period).
        default_start = shared["eval_every"] * shared["steps_per_iteration"]
        record["rlfit"] = run_rlfit(shared, work, record.get("brax", {}).get("window_start_step", default_start))
    record["notes"] = NOTES
    keys = ["final_eval_reward", "env_steps", "total_wall_s", "total_cpu_s", "xla_compile_s_total", "compile_s",
            "warmup_extra_s", "time_to_first_progress_s", "window", "honest_sps_after_compile",
            "honest_train_only_sps_after_compile", "brax_reported_sps_mean_after_warmup", "sps_mean",
            "loadavg_1min_before"]
    brax, rlfit = record.get("brax", {}), record.get("rlfit", {})
    print_table([[k, brax.get(k), rlfit.get(k)] for k in keys], ["figure", "brax", "rlfit"])
    finish_record(record, args.out)


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
    "Brax (bootstrap_on_timeout=False, its default) masks the GAE error at time-limit steps; rlfit bootstraps "
    "from the value of the reached observation. CartpoleBalance has no terminal states; truncations come every "
    "1000 steps.",
    "Brax runs on jax/jaxlib 0.9.2, rlfit on the main venv's jax; their XLA versions differ.",
    "total_cpu_s: user + system CPU seconds of the subprocess; less sensitive than wall time to other load.",
]


if __name__ == "__main__":
    main()
