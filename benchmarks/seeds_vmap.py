"""Seeds in one compiled program (`rlfit.run.seed_group`, jax.vmap over seeds) against the same seeds trained
one after another in one process (what `rlfit experiment` does today: the second seed on reuses the compiled
programs), same env steps per seed. Wall clock includes building the states and compiling.

    .venv/bin/python benchmarks/seeds_vmap.py                        # CartpoleBalance quick, 8 seeds, 10 iterations
    .venv/bin/python benchmarks/seeds_vmap.py --iterations 82        # the quick preset's whole run
    .venv/bin/python benchmarks/seeds_vmap.py --quick                # a check of the script: the toy env, 2 seeds

Writes results/seeds_vmap.json: both wall clocks, their ratio, and both sets of final eval rewards (each seed's
own evaluation key; the sets differ where a vmapped lane's rounding has drifted from the solo run's).
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from common import TOY_ENV, finish_record, print_table, start_record, toy_env_importable
from rlfit.config.schema import resolve
from rlfit.hardware.jax_setup import configure_jax
from rlfit.planning.plan import config_sizes, make_plan
from rlfit.run.evaluate import eval_key
from rlfit.run.seed_group import SeedGroup
from rlfit.run.trainer import Trainer


def sequential(trainer: Trainer, seeds: list[int], iterations: int) -> tuple[float, list[float]]:
    """Each seed alone, one after another, the programs compiled once (as an experiment reuses them)."""
    started = time.perf_counter()
    compiled = None
    rewards = []
    for seed in seeds:
        state = trainer.learner.init(seed)
        compiled = compiled or trainer.compile(state)
        for _ in range(iterations):
            state, metrics = compiled.iteration(state)
        jax.block_until_ready(metrics)
        result = compiled.evaluate(*trainer.learner.acting(state), eval_key(seed, iterations))
        rewards.append(float(result.episode_reward))
    return time.perf_counter() - started, rewards


def grouped(trainer: Trainer, seeds: list[int], iterations: int) -> tuple[float, list[float]]:
    """All seeds in one vmapped program."""
    started = time.perf_counter()
    group = SeedGroup.build(trainer, seeds)
    state = group.init()
    for _ in range(iterations):
        state, metrics = group.step(state)
    jax.block_until_ready(metrics)
    rewards = [float(r) for r in np.asarray(group.evaluate(state, iterations).episode_reward)]
    return time.perf_counter() - started, rewards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="the toy environment (tests/toy_env.py), smoke preset, "
                        "2 seeds, 1 iteration (a check only)")
    args = parser.parse_args()
    if args.quick:  # both ways' programs compiled in a second or two each
        args.env, args.preset = TOY_ENV, "smoke"
        toy_env_importable()
    configure_jax("fp32")
    overrides: list[str] = []
    seeds, iterations = (list(range(2)), 1) if args.quick else (list(range(args.seeds)), args.iterations)
    config = resolve(args.env, args.preset, overrides=overrides)
    trainer = Trainer.build(config, make_plan(config, config_sizes(config)))
    record = start_record("seeds_vmap_quick" if args.quick else "seeds_vmap")
    record.update({"env": args.env, "preset": args.preset, "overrides": overrides, "seeds": seeds,
                   "iterations": iterations, "sizes": trainer.plan.sizes._asdict(),
                   "env_steps_per_seed": iterations * trainer.plan.env_steps_per_iteration})
    # Grouped first: the sequential run then finds nothing of it in the in-process caches that it could use.
    group_s, group_rewards = grouped(trainer, seeds, iterations)
    sequential_s, sequential_rewards = sequential(trainer, seeds, iterations)
    record.update({"grouped_wall_s": round(group_s, 2), "sequential_wall_s": round(sequential_s, 2),
                   "speedup": round(sequential_s / group_s, 3), "grouped_final_eval_rewards": group_rewards,
                   "sequential_final_eval_rewards": sequential_rewards,
                   "max_abs_reward_difference": max(abs(a - b) for a, b in zip(group_rewards, sequential_rewards))})
    finish_record(record)
    print_table([("one program (vmap)", f"{group_s:.1f}", " ".join(f"{r:.1f}" for r in group_rewards)),
                 ("one after another", f"{sequential_s:.1f}", " ".join(f"{r:.1f}" for r in sequential_rewards))],
                ("seeds", "wall s", "final eval rewards"))
    print(f"speed-up of one program: {sequential_s / group_s:.2f}x")


if __name__ == "__main__":
    main()
