"""What rlfit does for convolutions on a CPU, measured: XLA's default way against rlfit's.

"XLA default": XLA's own convolutions (`conv_impl='native'`) compiled with XLA's default options.
"rlfit": the convolutions rlfit's encoders use on a CPU (`conv_impl='taps'`, rlfit.networks.conv2d: a gradient
XLA runs fast inside loops) compiled with `rlfit.hardware.jax_setup.CPU_COMPILER_OPTIONS` (XLA's YNNPACK fusions off).

Each case is one function compiled ahead of time both ways and timed as the median of `--reps` calls after a
warm-up call, on the same inputs; "in a scan" runs the function 3 times in one `lax.scan` (as a training
iteration runs its updates) and reports the time per step:
  - simple2dcnn forward+backward, 32 clips of 3 x 64 x 64 RGB (the encoder alone);
  - one pixel SAC gradient update (critic, actor, temperature, target) at batch 128, simple2dcnn, 3 x 64 x 64 RGB,
    with the `pixels` preset's networks;
  - one state SAC gradient update at batch 256 with the `quick` preset's networks, 5 observations (no convolution).

Then whole training iterations of the `quick` presets on CartpoleBalance (no convolution), XLA's default options
against `CPU_COMPILER_OPTIONS`: SAC's (64 policy steps of 16 environments, each followed by 4 updates of batch
256) and PPO's. Both ways are compiled first, then called in turn `--iteration-reps` times, so a change in the
machine's load falls on both; the table gives the median and the 10th percentile of seconds an iteration.

    .venv/bin/python benchmarks/cpu_compile_options.py [--quick] [--reps 3] [--iteration-reps 30]

Writes results/cpu_compile_options.json. `--quick` checks the script, not the figures (to results/tmp/): the
encoder on 2 clips of 16 x 16 frames (XLA's own convolution gradient in a scan took 5.6 CPU seconds at 64 x 64, 0.4
at 16 x 16) and the state SAC update with the `smoke` preset's sizes (the pixel update, the same code with an
encoder, left out: its four programs took 11 s to compile on a quiet machine), in a scan only (the scan runs the step
itself; "alone" as well doubled the compiles, the SAC update's 2-3 s each at load 9), one rep, then the `smoke` preset's
PPO iteration (not SAC's: the same code, 1.6 CPU seconds more to compile) on the toy environment of
tests/toy_env.py, 3 iteration reps.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
from common import REPO, finish_record, print_table, start_record

import rlfit.networks.encoders as encoders
from rlfit.algos.sac.config import PRESETS, SACConfig
from rlfit.algos.sac.networks import make_sac_networks
from rlfit.algos.offpolicy.replay import Batch
from rlfit.algos.sac.update import init_opt_states, make_gradient_update, make_optimizers
from rlfit.config.schema import resolve
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.hardware.jax_setup import CPU_COMPILER_OPTIONS
from rlfit.networks.encoders import EncoderSpec, make_encoder
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer

FRAMES, SIZE, CHANNELS = 3, 64, 3
QUICK_SIZE = 16
"""--quick's frame side: the simple2dcnn encoder's strided convolutions still leave a 1 x 1 map."""
SCAN_STEPS = 3
WAYS = {"xla_default": ("native", {}), "rlfit": ("taps", CPU_COMPILER_OPTIONS)}
ITERATIONS = {"SAC quick iteration, CartpoleBalance": ("sac", "CartpoleBalance", "quick"),
              "PPO quick iteration, CartpoleBalance": ("ppo", "CartpoleBalance", "quick")}
QUICK_ITERATIONS = {"PPO smoke iteration, toy env": ("ppo", "tests.toy_env:make", "smoke")}
"""--quick's iteration: PPO's (SAC's takes the same code path, and its two programs took 4.3 CPU seconds where PPO's
took 2.7) on the toy environment, whose iteration compiled in 8-12 s at load 10-12 where CartpoleBalance's took
19-21 s on a quiet machine."""


@contextlib.contextmanager
def convolutions(impl: str) -> Iterator[None]:
    """Encoders built inside compute their convolutions with `impl` (make_encoder's default, patched)."""
    chosen = encoders.choose_impl
    encoders.choose_impl = lambda platform: impl
    try:
        yield
    finally:
        encoders.choose_impl = chosen


def frames(key: jax.Array, batch: int, size: int = SIZE) -> jax.Array:
    return jax.random.randint(key, (batch, FRAMES, size, size, CHANNELS), 0, 256).astype(jnp.uint8)


def encoder_case(clips_in_batch: int, size: int = SIZE) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """(params, clips) -> (loss, grads) of the encoder; in a scan the params follow the gradient."""
    module = make_encoder(EncoderSpec("simple2dcnn", 50, FRAMES, size))
    clips = frames(jax.random.PRNGKey(0), clips_in_batch, size)
    params = module.init(jax.random.PRNGKey(1), clips[:1])
    step = jax.value_and_grad(lambda p, x: jnp.mean(jnp.square(module.apply(p, x))))

    def descend(p, x):
        _, grads = step(p, x)
        return jax.tree.map(lambda a, g: a - 1e-3 * g, p, grads), x

    return descend, (params, clips)


def sac_case(config: SACConfig, obs: Any, batch_obs: Any, batch_next: Any, encoder: EncoderSpec | None):
    """(params, opt states, batch) -> the same after one update."""
    networks = make_sac_networks(obs, 1, config, encoder=encoder)
    optimizers = make_optimizers(config, encoder=encoder is not None)
    update = make_gradient_update(networks, optimizers, config)
    params = networks.init(jax.random.PRNGKey(0))
    size = config.batch_size
    batch = Batch(batch_obs, jnp.zeros((size, 1)), jnp.ones(size), jnp.ones(size), batch_next)

    def step(params, opt_states, batch):
        params, opt_states, *_ = update(params, opt_states, None, batch, jax.random.PRNGKey(3))
        return params, opt_states, batch

    return step, (params, init_opt_states(optimizers, params), batch)


def cases(quick: bool = False) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """Each case's label -> (step, its arguments). `quick`: the encoder on 2 clips of QUICK_SIZE frames and the
    state update with the `smoke` preset's networks; the pixel update (the same code with an encoder, 11 s of
    compiles) left out."""
    state = SACConfig(**PRESETS["smoke" if quick else "quick"]["sac"])
    vectors = jax.random.normal(jax.random.PRNGKey(4), (2, state.batch_size, 5))
    if quick:
        built = {f"simple2dcnn fwd+bwd, 2 clips of {QUICK_SIZE}x{QUICK_SIZE}": encoder_case(2, QUICK_SIZE)}
    else:
        built = {"simple2dcnn fwd+bwd, 32 clips": encoder_case(32)}
    if not quick:
        pixels = SACConfig(**{**PRESETS["pixels"]["sac"], "batch_size": 128})
        one = {PIXELS_KEY: jnp.zeros((FRAMES, SIZE, SIZE, CHANNELS), jnp.uint8)}
        built["pixel SAC update, batch 128"] = sac_case(
            pixels, one, {PIXELS_KEY: frames(jax.random.PRNGKey(5), 128)},
            {PIXELS_KEY: frames(jax.random.PRNGKey(6), 128)}, EncoderSpec("simple2dcnn", 50, FRAMES, SIZE))
    built[f"state SAC update, batch {state.batch_size}"] = sac_case(state, jnp.zeros(5), vectors[0], vectors[1], None)
    return built


def in_scan(step: Callable[..., Any]) -> Callable[..., Any]:
    """SCAN_STEPS of `step` (args -> args) in one lax.scan."""
    return lambda *args: jax.lax.scan(lambda carry, _: (step(*carry), None), args, None, length=SCAN_STEPS)[0]


def timed(fn: Callable[..., Any], args: tuple[Any, ...], options: dict[str, str], reps: int, steps: int):
    started = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile(compiler_options=options)
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append((time.perf_counter() - started) / steps)
    return {"compile_s": round(compile_s, 2), "median_s_per_step": round(statistics.median(times), 4),
            "times_s_per_step": [round(t, 4) for t in times]}


def iteration_case(algo: str, env: str, preset: str) -> tuple[Callable[..., Any], Any, int]:
    """(`preset`'s training iteration of `algo` on `env`, a fresh state, env steps per iteration)."""
    config = resolve(env, preset, None, [f"algo={algo}"])
    trainer = Trainer.build(config, make_plan(config))
    return trainer.learner.step, trainer.init_state(), trainer.plan.env_steps_per_iteration


def timed_in_turn(algo: str, env: str, preset: str, reps: int) -> dict[str, Any]:
    """Both ways' iterations compiled, then called in turn `reps` times after a warm-up call each."""
    step, state, env_steps = iteration_case(algo, env, preset)
    compiled, states, times = {}, {}, {}
    for way, (_, options) in WAYS.items():
        started = time.perf_counter()
        compiled[way] = jax.jit(step, donate_argnums=0).lower(state).compile(compiler_options=options)
        times[way] = {"compile_s": round(time.perf_counter() - started, 2), "times_s": []}
        states[way] = jax.tree.map(jnp.copy, state)
        states[way] = jax.block_until_ready(compiled[way](states[way])[0])
    for _ in range(reps):
        for way in WAYS:
            started = time.perf_counter()
            states[way] = jax.block_until_ready(compiled[way](states[way])[0])
            times[way]["times_s"].append(round(time.perf_counter() - started, 4))
    for result in times.values():
        ordered = sorted(result["times_s"])
        result |= {"median_s": round(statistics.median(ordered), 4), "p10_s": ordered[len(ordered) // 10],
                   "env_steps_per_s_at_median": round(env_steps / statistics.median(ordered))}
    return {"env_steps_per_iteration": env_steps, **times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a check of the script: small batches and frames in a scan only, the toy "
                             "environment's iteration, one rep; to results/tmp")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--iteration-reps", type=int, default=30)
    args = parser.parse_args()
    reps = 1 if args.quick else args.reps
    iteration_reps = 3 if args.quick else args.iteration_reps
    if args.quick and str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # tests/toy_env.py, imported by name
    record = start_record("cpu_compile_options_quick" if args.quick else "cpu_compile_options") | {
        "backend": jax.default_backend(), "rlfit_options": CPU_COMPILER_OPTIONS, "scan_steps": SCAN_STEPS,
        "cases": []}
    rows = []
    wheres = ("in a scan",) if args.quick else ("alone", "in a scan")
    for way, (impl, options) in WAYS.items():
        with convolutions(impl):
            built = cases(args.quick)
        for label, (step, step_args) in built.items():
            for where in wheres:
                fn, steps = (step, 1) if where == "alone" else (in_scan(step), SCAN_STEPS)
                print(f"{way}: {label}, {where} ...", flush=True)
                result = timed(fn, step_args, options, reps, steps)
                record["cases"].append({"way": way, "case": label, "where": where, "conv_impl": impl,
                                        "compiler_options": options, **result})
    for label in built:
        for where in wheres:
            found = {c["way"]: c["median_s_per_step"] for c in record["cases"]
                     if c["case"] == label and c["where"] == where}
            rows.append([label, where, found["xla_default"], found["rlfit"],
                         round(found["xla_default"] / found["rlfit"], 1)])
    print_table(rows, ["case", "where", "XLA default s/step", "rlfit s/step", "speedup"])
    record["iterations"] = {}
    for label, (algo, env, preset) in (QUICK_ITERATIONS if args.quick else ITERATIONS).items():
        print(f"{label}: both ways in turn, {iteration_reps} reps ...", flush=True)
        record["iterations"][label] = found = timed_in_turn(algo, env, preset, iteration_reps)
        rows_in_turn = [[label, way, found[way]["median_s"], found[way]["p10_s"],
                         found[way]["env_steps_per_s_at_median"]] for way in WAYS]
        print_table(rows_in_turn, ["iteration", "way", "median s", "p10 s", "env-steps/s at median"])
    finish_record(record)


if __name__ == "__main__":
    main()
