"""What rlfit's CPU compiler options (`rlfit.jax_setup.CPU_COMPILER_OPTIONS`: XLA's YNNPACK fusions off) change.

Method: each case is one function compiled ahead of time twice, with XLA's default options and with rlfit's, and
timed as the median of `--reps` calls after a warm-up call, on the same inputs:
  - simple2dcnn forward+backward, 32 clips of 3 x 64 x 64 RGB (the encoder alone);
  - one pixel SAC gradient update (critic, actor, temperature, target) at batch 128, simple2dcnn, 3 x 64 x 64 RGB,
    the `pixels` preset's networks;
  - one state SAC gradient update at batch 256, the `quick` preset's networks, 5 observations (CartpoleBalance).

    .venv/bin/python benchmarks/cpu_compile_options.py [--quick] [--reps 5]

Writes results/cpu_compile_options.json (--quick: one rep, results/tmp/).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from common import finish_record, print_table, start_record

from rlfit.algos.sac.config import PRESETS, SACConfig
from rlfit.algos.sac.networks import make_sac_networks
from rlfit.algos.sac.replay import Batch
from rlfit.algos.sac.update import init_opt_states, make_gradient_update, make_optimizers
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.jax_setup import CPU_COMPILER_OPTIONS
from rlfit.networks.encoders import EncoderSpec, make_encoder

FRAMES, SIZE, CHANNELS = 3, 64, 3


def frames(key: jax.Array, batch: int) -> jax.Array:
    return jax.random.randint(key, (batch, FRAMES, SIZE, SIZE, CHANNELS), 0, 256).astype(jnp.uint8)


def encoder_case() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    module = make_encoder(EncoderSpec("simple2dcnn", 50, FRAMES, SIZE))
    clips = frames(jax.random.PRNGKey(0), 32)
    params = module.init(jax.random.PRNGKey(1), clips[:1])
    return jax.value_and_grad(lambda p, x: jnp.mean(jnp.square(module.apply(p, x)))), (params, clips)


def sac_update_case(config: SACConfig, obs: Any, batch_obs: Any, batch_next: Any, encoder: EncoderSpec | None):
    networks = make_sac_networks(obs, 1, config, encoder=encoder)
    optimizers = make_optimizers(config, encoder=encoder is not None)
    params = networks.init(jax.random.PRNGKey(0))
    size = config.batch_size
    batch = Batch(batch_obs, jnp.zeros((size, 1)), jnp.ones(size), jnp.ones(size), batch_next)
    update = make_gradient_update(networks, optimizers, config)
    return update, (params, init_opt_states(optimizers, params), None, batch, jax.random.PRNGKey(3))


def cases() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    pixels = SACConfig(**{**PRESETS["pixels"]["sac"], "batch_size": 128})
    spec = EncoderSpec("simple2dcnn", 50, FRAMES, SIZE)
    one = {PIXELS_KEY: jnp.zeros((FRAMES, SIZE, SIZE, CHANNELS), jnp.uint8)}
    state = SACConfig(**PRESETS["quick"]["sac"])
    vectors = jax.random.normal(jax.random.PRNGKey(4), (2, state.batch_size, 5))
    return {
        "simple2dcnn fwd+bwd, 32 clips": encoder_case(),
        "pixel SAC update, batch 128": sac_update_case(
            pixels, one, {PIXELS_KEY: frames(jax.random.PRNGKey(5), 128)},
            {PIXELS_KEY: frames(jax.random.PRNGKey(6), 128)}, spec),
        "state SAC update, batch 256": sac_update_case(state, jnp.zeros(5), vectors[0], vectors[1], None),
    }


def timed(fn: Callable[..., Any], args: tuple[Any, ...], options: dict[str, str], reps: int) -> dict[str, Any]:
    started = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile(compiler_options=options)
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - started)
    return {"compile_s": round(compile_s, 2), "median_s": round(statistics.median(times), 4),
            "times_s": [round(t, 4) for t in times]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one rep; to results/tmp")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    reps = 1 if args.quick else args.reps
    record = start_record("cpu_compile_options_quick" if args.quick else "cpu_compile_options") | {
        "backend": jax.default_backend(), "rlfit_options": CPU_COMPILER_OPTIONS, "cases": []}
    for label, (fn, fn_args) in cases().items():
        print(f"{label} ...", flush=True)
        default = timed(fn, fn_args, {}, reps)
        rlfit = timed(fn, fn_args, CPU_COMPILER_OPTIONS, reps)
        record["cases"].append({"case": label, "xla_default": default, "rlfit": rlfit,
                                "speedup": round(default["median_s"] / rlfit["median_s"], 2)})
    print_table([[c["case"], c["xla_default"]["median_s"], c["rlfit"]["median_s"], c["speedup"]]
                 for c in record["cases"]], ["case", "XLA default s", "rlfit s", "speedup"])
    finish_record(record)


if __name__ == "__main__":
    main()
