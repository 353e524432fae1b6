"""Brax's PPO (`ppo.train`, brax_child.py) at the settings of an rlfit preset, in the interpreter that runs rlfit:
gpu_check.py's `brax_*` steps, on the GPU machine where rlfit, Brax and Playground share the machine's CUDA JAX.

    python benchmarks/gpu_brax.py ENV PRESET OUT.json [--set KEY=VALUE ...] [--timesteps N] [--no-shim]

The settings are brax_compare.py's (`ppo_shared_settings`, `brax_spec`: the preset's sizes, hyperparameters and
networks, `run.eval_every` iterations between evaluations, `num_resets_per_eval=0`), for the preset's
`run.num_timesteps` (or N) rounded up to whole evaluation periods; a time box ends the run long before on a big
environment. OUT.json is rewritten after every progress callback (a run cut off keeps its callbacks) and reads:
`available` (null while running; false with `reason` when Brax cannot run here), `shim`, `settings`, `spec`,
`callbacks` (brax_child.py's rows), and at the end brax_child.py's timings.

Brax 0.14.2 calls `jax.device_put_replicated`, which jax 0.10 removed (benchmarks/brax-requirements.txt). Unless
`--no-shim`, a missing `jax.device_put_replicated` is restored for one device (each leaf put on the device with a
leading axis of 1, what jax 0.9 gave `pmap` over one device) and `shim` says so; with `--no-shim` its absence makes
the run "not available" at once (before Brax compiles anything), as do any other missing JAX function and Brax or
Playground failing to import (exit code 0, `reason` the error's line).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

SHIM_NOTE = ("jax.device_put_replicated (removed in jax 0.10, called once by Brax 0.14.2's ppo.train to place its "
             "training state) restored by gpu_brax.py for one device: each leaf with a leading axis of 1")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env")
    parser.add_argument("preset")
    parser.add_argument("out", type=Path)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--timesteps", type=int, default=None, help="default: the preset's run.num_timesteps")
    parser.add_argument("--no-shim", dest="shim", action="store_false",
                        help="leave jax.device_put_replicated missing where this JAX lacks it")
    return parser.parse_args()


def settings(env: str, preset: str, overrides: list[str], timesteps: int | None) -> dict[str, Any]:
    """brax_compare.py's shared PPO settings for `preset` (with `overrides`), `timesteps` (default: the preset's)
    rounded up to whole evaluation periods of `run.eval_every` iterations, and the observation keys each network
    reads (G1's value network reads `privileged_state`)."""
    from brax_compare import ppo_shared_settings
    from rlfit.config.schema import resolve

    config = resolve(env, preset, overrides=overrides)
    p = config.ppo
    per_iteration = p.batch_size * p.num_minibatches * p.unroll_length * config.env.action_repeat
    every = max(1, config.run.eval_every)
    iterations = math.ceil((timesteps or config.run.num_timesteps) / per_iteration / every) * every
    shared = ppo_shared_settings(argparse.Namespace(env=env, preset=preset, seed=config.run.seed,
                                                    iterations=iterations, eval_every=every), overrides)
    return {**shared, "obs_keys": {"policy_obs_key": p.policy_obs_key, "value_obs_key": p.value_obs_key}}


def restore_device_put_replicated() -> str | None:
    """Puts back `jax.device_put_replicated` for one device where this JAX lacks it; what was done, or None."""
    import jax
    import numpy as np

    if hasattr(jax, "device_put_replicated"):
        return None

    def device_put_replicated(x: Any, devices: list[Any]) -> Any:
        if len(devices) != 1:
            raise NotImplementedError("gpu_brax.py's device_put_replicated covers one device only")
        return jax.tree.map(lambda leaf: jax.device_put(np.asarray(leaf)[None], devices[0]), x)

    jax.device_put_replicated = device_put_replicated  # type: ignore[attr-defined]
    return SHIM_NOTE


def not_available(error: BaseException) -> bool:
    """True for an error that says Brax cannot run on this software (an import, or a JAX function it lacks)."""
    return isinstance(error, ImportError) or (isinstance(error, AttributeError) and "jax" in str(error))


def main() -> int:
    args = parse_args()
    record: dict[str, Any] = {"available": None, "reason": None, "shim": None, "callbacks": []}

    def write() -> None:
        partial = args.out.with_suffix(".partial")
        partial.write_text(json.dumps(record, indent=2))
        partial.replace(args.out)

    record["settings"] = settings(args.env, args.preset, args.overrides, args.timesteps)
    from brax_compare import brax_spec

    spec = brax_spec(record["settings"])
    spec["ppo"].update(record["settings"]["obs_keys"])
    record["spec"] = spec
    write()
    try:
        record["shim"] = restore_device_put_replicated() if args.shim else None
        import brax_child
        import jax

        if not hasattr(jax, "device_put_replicated"):  # --no-shim on jax >= 0.10: known before Brax compiles
            raise AttributeError(f"jax {jax.__version__} has no device_put_replicated, which Brax's ppo.train calls")
        result = brax_child.train(spec, on_progress=lambda rows: (record.update(callbacks=list(rows)), write()))
    except Exception as error:  # noqa: BLE001 - Brax's failures are recorded; only the known kinds are "not available"
        if not not_available(error):
            raise
        record.update(available=False, reason=f"{type(error).__name__}: {error}",
                      where=traceback.format_exc(limit=-2).strip().splitlines()[-3:])
        write()
        return 0
    record.update(result, available=True)
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
