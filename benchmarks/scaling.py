"""Data-parallel scaling (`run.devices`, `rlfit.parallel.mesh`): env steps/s of one run split over 1, 2, 4 devices, the
global sizes unchanged, and each device's share of the step's memory (XLA's analysis of the compiled program).

    .venv/bin/python benchmarks/scaling.py                         # CartpoleBalance quick on 1, 2, 4 forced CPU devices
    .venv/bin/python benchmarks/scaling.py --gpus                  # 1..N real GPUs of this machine
    .venv/bin/python benchmarks/scaling.py --reward-seeds 0 1 2    # also whole quick runs on 1 and 2 devices: final rewards
    .venv/bin/python benchmarks/scaling.py --rewards-only --reward-seeds 0 1 2   # only those (timing-insensitive)
    .venv/bin/python benchmarks/scaling.py --quick                 # a check of the script: toy env, 2 devices

On a CPU the devices are forced with XLA_FLAGS=--xla_force_host_platform_device_count=N: they share the same
cores, so more devices cannot be faster; the CPU rows measure the overhead of splitting (collectives, a
program per device) and check that it runs. Scaling efficiency = sps(N) / (N * sps(1)).
Each device count runs in its own process (XLA_FLAGS is read when JAX starts). Writes results/scaling[_gpu].json.
`--quick` checks the script, not the figures: the toy environment of tests/toy_env.py with the `smoke` preset
(unless --env / --preset are given) on 2 devices only (unless --counts is given), one timed iteration; its JSON
goes to results/tmp/scaling_quick.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from common import REPO, finish_record, print_table, start_record

QUICK_ENV, QUICK_PRESET, QUICK_COUNTS = "tests.toy_env:make", "smoke", [2]
"""--quick's environment, preset and device counts: one child process (each costs an interpreter, JAX and its
compiles), split over 2 forced devices, so that the check runs the split."""


def child(args: argparse.Namespace) -> None:
    """One device count: build, compile, time `--iterations` iterations; print one JSON line."""
    import jax

    from rlfit.config.schema import resolve
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning.device_plan import plan_for
    from rlfit.run.probes import StepProbes
    from rlfit.run.evaluate import eval_key
    from rlfit.run.trainer import Trainer

    configure_jax("fp32")
    config = resolve(args.env, args.preset, overrides=[*args.set, f"run.devices={args.devices}"])
    config, plan, env = plan_for(config, StepProbes())
    trainer = Trainer.build(config, plan, env=env)
    started = time.perf_counter()
    state = trainer.init_state()
    jax.block_until_ready(state)
    init_s = time.perf_counter() - started
    started = time.perf_counter()
    compiled = trainer.compile(state)
    compile_s = time.perf_counter() - started
    analysis = compiled.iteration.memory_analysis()
    per_device = None if analysis is None else int(analysis.temp_size_in_bytes + analysis.argument_size_in_bytes
                                                  + analysis.output_size_in_bytes - analysis.alias_size_in_bytes)
    state, metrics = compiled.iteration(state)  # one warm-up iteration, not timed
    jax.block_until_ready(metrics)
    started = time.perf_counter()
    for _ in range(args.iterations):
        state, metrics = compiled.iteration(state)
    jax.block_until_ready(metrics)
    seconds = time.perf_counter() - started
    result = compiled.evaluate(*trainer.learner.acting(state), eval_key(config.run.seed, args.iterations + 1))
    print(json.dumps({"devices": plan.devices, "sizes": plan.sizes._asdict(), "init_s": round(init_s, 2),
                      "compile_s": round(compile_s, 2), "timed_iterations": args.iterations,
                      "timed_s": round(seconds, 3),
                      "sps": round(args.iterations * plan.env_steps_per_iteration / seconds, 1),
                      "step_bytes_per_device": per_device, "eval_reward": float(result.episode_reward),
                      "device_kind": jax.devices()[0].device_kind}))


def whole_run(args: argparse.Namespace, devices: int, seed: int) -> dict:
    """`rlfit train ENV --preset PRESET` on `devices` devices (forced on a CPU): its summary's figures."""
    run_dir = REPO / "benchmarks" / "results" / "tmp" / f"scaling-{devices}dev-seed{seed}-{int(time.time())}"
    env = child_environment(args, devices)
    sets = [a for s in [*args.set, f"run.devices={devices}"] for a in ("--set", s)]
    done = subprocess.run([str(REPO / ".venv" / "bin" / "rlfit"), "train", args.env, "--preset", args.preset,
                           "--seed", str(seed), *sets, "--run-dir", str(run_dir), "--quiet"], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"run on {devices} devices failed: {done.stderr[-2000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"devices": devices, "seed": seed, "final_eval_reward": summary["final_eval_reward"],
            "best_eval_reward": summary["best_eval_reward"], "train_wall_s": round(summary["train_wall_s"], 1),
            "sps_mean": round(summary["sps_mean"], 1), "env_steps": summary["env_steps"]}


def child_environment(args: argparse.Namespace, devices: int) -> dict[str, str]:
    env = dict(os.environ)
    if not args.gpus:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    return env


def with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """`args` with the environment and preset filled in: --quick's (and its device counts and one iteration) where
    it is given, else CartpoleBalance's quick preset; options given on the command line win."""
    if args.quick:
        args.env, args.preset = args.env or QUICK_ENV, args.preset or QUICK_PRESET
        args.counts = args.counts or QUICK_COUNTS
        args.iterations = 1
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))  # tests/toy_env.py, imported by name (here and in each child)
    args.env, args.preset = args.env or "CartpoleBalance", args.preset or "quick"
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=None, help=f"default CartpoleBalance (--quick: {QUICK_ENV})")
    parser.add_argument("--preset", default=None, help=f"default quick (--quick: {QUICK_PRESET})")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--counts", type=int, nargs="+", help="device counts (default: 1 2 4, or 1..N GPUs)")
    parser.add_argument("--iterations", type=int, default=5, help="timed iterations per device count")
    parser.add_argument("--gpus", action="store_true", help="this machine's GPUs instead of forced CPU devices")
    parser.add_argument("--reward-seeds", type=int, nargs="*", default=[],
                        help="also train whole runs with these seeds on 1 and 2 devices and record final rewards")
    parser.add_argument("--rewards-only", action="store_true",
                        help="only the whole runs of --reward-seeds (writes results/scaling_rewards.json)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a check only: {QUICK_ENV}, the {QUICK_PRESET} preset, "
                             f"{' and '.join(map(str, QUICK_COUNTS))} devices, 1 timed iteration")
    parser.add_argument("--child-devices", type=int, help=argparse.SUPPRESS)
    args = with_defaults(parser.parse_args())
    if args.child_devices:
        args.devices = args.child_devices
        return child(args)
    if args.gpus:
        import jax

        counts = args.counts or list(range(1, len(jax.devices()) + 1))
    else:
        counts = args.counts or [1, 2, 4]
    name = "scaling_rewards" if args.rewards_only else "scaling_gpu" if args.gpus else "scaling"
    record = start_record(name + ("_quick" if args.quick else ""))
    record.update({"env": args.env, "preset": args.preset, "overrides": args.set, "counts": counts,
                   "forced_cpu_devices": not args.gpus})
    rows = []
    for devices in [] if args.rewards_only else counts:
        done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child-devices", str(devices)],
                              env=child_environment(args, devices), capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{devices} devices failed: {done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for row in rows:
        row["efficiency"] = round(row["sps"] / (row["devices"] * rows[0]["sps"] / rows[0]["devices"]), 3)
    record["rows"] = rows
    record["whole_runs"] = [whole_run(args, devices, seed) for seed in args.reward_seeds for devices in (1, 2)]
    finish_record(record)
    print_table([(r["devices"], r["sps"], r["efficiency"], r["compile_s"], r["step_bytes_per_device"],
                  f"{r['eval_reward']:.1f}") for r in rows],
                ("devices", "env steps/s", "efficiency", "compile s", "step bytes per device", "eval reward"))
    for run in record["whole_runs"]:
        print(f"seed {run['seed']} on {run['devices']} device(s): final eval reward {run['final_eval_reward']:.1f}, "
              f"train {run['train_wall_s']} s")


if __name__ == "__main__":
    main()
