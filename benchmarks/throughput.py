"""How much of the simulator's speed rlfit's trainer keeps, at one `num_envs`.

Measures env-steps/s, compile excluded, each a jitted function timed over several repeats
(`block_until_ready`), at the same number of environments:

  raw       Playground alone: `jax.vmap(env.step)` in one `lax.scan`, random actions, no wrapper
  vec_env   rlfit's `VecEnv.step` (time limit, auto-reset, episode statistics) in one `lax.scan`, random actions
  collect   rlfit's rollout (`rlfit.algos.ppo.rollout.collect`): policy network + VecEnv, one iteration's worth
  train     rlfit's compiled training iteration (collect + normalizer + GAE + epochs of updates), no evaluation

and the ratios train / vec_env (what the trainer keeps of the simulator), vec_env / raw (the wrapper's cost).

    .venv/bin/python benchmarks/throughput.py                       # CartpoleBalance, quick preset's 512 envs
    .venv/bin/python benchmarks/throughput.py --env CheetahRun --num-envs 1024
    .venv/bin/python benchmarks/throughput.py --quick               # a check of the script: the toy env, seconds

`--quick` checks the script, not the figures: every measurement on the toy environment of tests/toy_env.py with
the `smoke` preset's sizes (the smallest programs rlfit compiles), 100 steps, 2 repeats, 2 iterations;
`--env` and `--preset` given with it still win; it compiles into the cache RLFIT_CACHE_DIR names where that is set
(the test session's: the trainer's iteration is quickstart.py's check's) instead of a fresh one. Its JSON goes to
results/tmp/throughput_quick.json.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from common import REPO, TMP, finish_record, print_table, start_record
from rlfit.config.schema import resolve
from rlfit.hardware.jax_setup import configure_jax
from rlfit.planning.plan import config_sizes, make_plan
from rlfit.algos.ppo.networks import make_agent
from rlfit.algos.ppo.rollout import collect
from rlfit.run.trainer import Trainer
from rlfit.versions import package_versions


QUICK_ENV, QUICK_PRESET = "tests.toy_env:make", "smoke"
"""--quick's environment and preset (unless --env / --preset are given): the smallest programs rlfit compiles."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default=None, help=f"default CartpoleBalance (--quick: {QUICK_ENV})")
    parser.add_argument("--preset", default=None,
                        help=f"sizes and networks come from this preset (default quick; --quick: {QUICK_PRESET})")
    parser.add_argument("--num-envs", type=int, default=None, help="default: the preset's ppo.num_envs")
    parser.add_argument("--steps", type=int, default=1000, help="scan length of the stepping measurements")
    parser.add_argument("--iterations", type=int, default=6, help="timed training iterations")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of each stepping measurement")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help=f"a check of the script: {QUICK_ENV} with the {QUICK_PRESET} preset, 100 steps, 2 repeats, "
                             "2 iterations")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default results/throughput.json; --quick: results/tmp/throughput_quick.json)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats, args.iterations = 100, 2, 2
        args.env, args.preset = args.env or QUICK_ENV, args.preset or QUICK_PRESET
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))  # tests/toy_env.py, imported by name
    args.env, args.preset = args.env or "CartpoleBalance", args.preset or "quick"
    return args


def build_trainer(args: argparse.Namespace) -> Trainer:
    """rlfit's trainer for the preset, with `--num-envs`.

    With another num_envs, batch_size grows (if needed) so that batch_size * num_minibatches is the smallest
    common multiple of num_envs and the preset's batch_size * num_minibatches (rlfit's divisibility rule).
    """
    overrides = [f"run.seed={args.seed}"]
    if args.num_envs is not None:
        base = resolve(args.env, args.preset).ppo
        sequences = math.lcm(args.num_envs, base.batch_size * base.num_minibatches)
        overrides += [f"ppo.num_envs={args.num_envs}", f"ppo.batch_size={sequences // base.num_minibatches}"]
    config = resolve(args.env, args.preset, overrides=overrides)
    # A fresh compile cache, so the reported compile times are cold ones (they are not part of any rate); --quick
    # checks the script, not them: it keeps the cache RLFIT_CACHE_DIR names (the test session's) where set.
    TMP.mkdir(parents=True, exist_ok=True)
    if not (args.quick and os.environ.get("RLFIT_CACHE_DIR")):
        os.environ["RLFIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="throughput-cache-", dir=TMP)
    configure_jax(config.run.precision)
    return Trainer.build(config, make_plan(config, config_sizes(config)))


def random_actions(key: jax.Array, num_envs: int, action_size: int) -> jax.Array:
    """[N, A] uniform in [-1, 1]."""
    return jax.random.uniform(key, (num_envs, action_size), minval=-1.0, maxval=1.0)


def raw_stepper(env: Any, num_envs: int, steps: int) -> tuple[Callable, tuple]:
    """Playground without rlfit: `steps` of `vmap(env.step)` with random actions; returns (fn, args)."""

    def run(state: Any, key: jax.Array) -> jax.Array:
        def body(carry, step_key):
            state = jax.vmap(env.step)(carry, random_actions(step_key, num_envs, env.action_size))
            return state, jnp.sum(state.reward)

        _, rewards = jax.lax.scan(body, state, jax.random.split(key, steps))
        return jnp.sum(rewards)

    start = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(1), num_envs))
    return run, (start, jax.random.PRNGKey(2))


def vec_env_stepper(trainer: Trainer, steps: int) -> tuple[Callable, tuple]:
    """rlfit's VecEnv: `steps` of `VecEnv.step` (auto-reset, time limit) with random actions."""
    venv = trainer.train_env

    def run(state: Any, key: jax.Array) -> jax.Array:
        def body(carry, step_key):
            carry, out = venv.step(carry, random_actions(step_key, venv.num_envs, venv.action_size))
            return carry, jnp.sum(out.reward)

        _, rewards = jax.lax.scan(body, state, jax.random.split(key, steps))
        return jnp.sum(rewards)

    return run, (jax.jit(venv.reset)(jax.random.PRNGKey(1)), jax.random.PRNGKey(2))


def collect_stepper(trainer: Trainer) -> tuple[Callable, tuple]:
    """rlfit's rollout: one training iteration's collection (policy + VecEnv), no update."""
    sizes = trainer.plan.sizes
    num_unrolls = sizes.batch_size * sizes.num_minibatches // sizes.num_envs
    state = trainer.init_state()
    agent = make_agent(trainer.obs_example, trainer.action_space, trainer.config.ppo, trainer.plan.precision)

    def run(params: Any, stats: Any, env_state: Any, key: jax.Array) -> jax.Array:
        _, data = collect(trainer.train_env, agent, params, stats, env_state, key,
                          sizes.unroll_length, num_unrolls)
        return jnp.sum(data.reward)

    return run, (state.params.policy, state.normalizer, state.env_state, jax.random.PRNGKey(2))


def time_pure(fn: Callable, args: tuple, env_steps: int, repeats: int) -> dict[str, Any]:
    """Compiles `fn(*args)` (timed apart), then times `repeats` calls; env-steps/s per call."""
    started = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - started
    seconds, cpu_started = [], time.process_time()
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        seconds.append(time.perf_counter() - started)
    return summarize(env_steps, seconds, compile_s, time.process_time() - cpu_started)


def time_training(trainer: Trainer, iterations: int) -> dict[str, Any]:
    """rlfit's compiled iteration (state donated), as the runner calls it; no evaluation."""
    state = trainer.init_state()
    compiled = trainer.compile(state)
    seconds, cpu_started = [], time.process_time()
    for _ in range(iterations):
        started = time.perf_counter()
        state, metrics = compiled.iteration(state)
        jax.block_until_ready((state, metrics))
        seconds.append(time.perf_counter() - started)
    return summarize(trainer.plan.env_steps_per_iteration, seconds, compiled.compile_s,
                     time.process_time() - cpu_started)


def summarize(env_steps: int, seconds: list[float], compile_s: float, cpu_s: float) -> dict[str, Any]:
    """Per-call env-steps/s; the median call is the headline (robust to other load on the machine).

    `cpu_per_wall` = process CPU seconds / wall seconds over the timed calls: how many cores it got.
    """
    rates = [env_steps / s for s in seconds]
    return {"env_steps_per_call": env_steps, "calls": len(seconds), "seconds": [round(s, 4) for s in seconds],
            "sps_median": statistics.median(rates), "sps_best": max(rates), "sps_worst": min(rates),
            "sps_total": env_steps * len(seconds) / sum(seconds), "compile_s": round(compile_s, 2),
            "cpu_per_wall": round(cpu_s / sum(seconds), 2),
            "cpu_s_per_million_steps": round(cpu_s / (env_steps * len(seconds)) * 1e6, 3)}


def main() -> None:
    args = parse_args()
    record = start_record("throughput_quick" if args.quick else "throughput")
    trainer = build_trainer(args)
    sizes, repeat = trainer.plan.sizes, trainer.config.env.action_repeat
    num_envs = sizes.num_envs
    print(f"{args.env}: {num_envs} envs, {sizes}, action_repeat {repeat}, device {trainer.plan.device}", flush=True)

    results = {}
    print("raw playground stepping ...", flush=True)
    fn, fn_args = raw_stepper(trainer.env, num_envs, args.steps * repeat)
    results["raw"] = time_pure(fn, fn_args, num_envs * args.steps * repeat, args.repeats)
    print("rlfit VecEnv stepping ...", flush=True)
    fn, fn_args = vec_env_stepper(trainer, args.steps)
    results["vec_env"] = time_pure(fn, fn_args, num_envs * args.steps * repeat, args.repeats)
    print("rlfit collect (policy + VecEnv) ...", flush=True)
    fn, fn_args = collect_stepper(trainer)
    results["collect"] = time_pure(fn, fn_args, trainer.plan.env_steps_per_iteration, args.repeats)
    print("rlfit training iteration ...", flush=True)
    results["train"] = time_training(trainer, args.iterations)

    sps = {name: r["sps_median"] for name, r in results.items()}
    cpu = {name: r["cpu_s_per_million_steps"] for name, r in results.items()}
    record.update({
        "env": args.env, "preset": args.preset, "num_envs": num_envs, "sizes": sizes._asdict(),
        "action_repeat": repeat, "device": trainer.plan.device, "impl": trainer.plan.impl,
        "stepping_scan_length": args.steps, "versions": package_versions(), "results": results,
        "ratios": {
            "train_over_vec_env": sps["train"] / sps["vec_env"],
            "collect_over_vec_env": sps["collect"] / sps["vec_env"],
            "vec_env_over_raw": sps["vec_env"] / sps["raw"],
            "train_over_raw": sps["train"] / sps["raw"],
        },
        # The same ratios from CPU seconds per step: less sensitive to other processes taking the cores.
        "ratios_by_cpu_time": {
            "train_over_vec_env": cpu["vec_env"] / cpu["train"],
            "vec_env_over_raw": cpu["raw"] / cpu["vec_env"],
        },
        "note": "env-steps/s = simulator steps (policy steps * action_repeat) per second of the median call; "
                "compile excluded. raw has no time limit or auto-reset; vec_env includes them (its scan of "
                "--steps from a fresh reset reaches the time limit once when --steps >= episode_length); collect "
                "runs one iteration's unrolls from a fresh reset, so it reaches no time limit.",
    })
    rows = [[name, r["sps_median"], r["sps_best"], r["sps_worst"], r["env_steps_per_call"], r["calls"],
             r["compile_s"], r["cpu_per_wall"]] for name, r in results.items()]
    print_table(rows, ["measure", "env-steps/s (median)", "best", "worst", "steps/call", "calls", "compile s",
                       "cpu/wall"])
    by_cpu = record["ratios_by_cpu_time"]
    print_table([[k, round(v, 3), round(by_cpu[k], 3) if k in by_cpu else None] for k, v in record["ratios"].items()],
                ["ratio", "by wall time", "by CPU time"])
    finish_record(record, args.out)


if __name__ == "__main__":
    main()
