"""Runs in its own interpreter with XLA_FLAGS=--xla_force_host_platform_device_count=4 (a test cannot change the
device count of the test process): trains the toy environments on 1, 2 and 4 CPU devices and writes what
tests/parallel/test_mesh.py checks into OUT (parameters as .npz, summaries and shardings as JSON).

    python tests/multi_device_worker.py OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import numpy as np

import rlfit
from rlfit.hardware.jax_setup import configure_jax
from rlfit.run.resume import resume
from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES, cli_in_process

PPO = [*TOY_TRAIN_OVERRIDES, "run.num_timesteps=12800", "run.eval_every=0"]
"""5 iterations of 2560 env steps, 32 environments."""
SAC = [o for o in TOY_TRAIN_OVERRIDES if not o.startswith("ppo.")] + [
    "algo=sac", "sac.num_envs=16", "sac.batch_size=32", "sac.min_replay_size=64", "sac.max_replay_size=65536",
    "run.num_timesteps=3000", "run.eval_every=0"]
"""16 environments; a replay buffer of 65536 transitions, most of SAC's state (tests/parallel/test_mesh.py checks its split)."""
WEIGHTED_ENV = "tests.toy_env:make_weighted"
"""The toy environment on a MuJoCo model (tests/toy_env.py): the point's mass and damping slow it, and the JAX camera
draws it."""
SAC_PIXELS = ["env.episode_length=100", "algo=sac", "env.observation=pixels", "env.image_size=16", "env.frames=2",
              "network.encoder=simple2dcnn", "run.num_eval_envs=4", "sac.min_replay_size=0"]
"""The weighted toy seen by the JAX camera (16x16, 2 frames), SAC's smoke sizes: 8 environments, 512 transitions,
from an empty buffer (no prefill in the starting-state program), whose split over devices the SAC run on the toy
environment shows. (On CartpoleBalance this run alone took 39 CPU seconds, most of them compiling its physics.)"""
RANDOMIZED = [*TOY_TRAIN_OVERRIDES, "env.randomization=tests.envs.randomizers:scaled_masses", "run.num_timesteps=5120",
              "run.eval_every=0"]
"""The weighted toy with the tests' randomizer: every environment its own mass and damping; 2 iterations of PPO's
sizes."""

REFUSED = [*TOY_TRAIN_OVERRIDES, "ppo.num_envs=32", "ppo.batch_size=48", "run.devices=3"]
"""32 environments do not split over 3 devices: `rlfit train` (the CLI's main, in this 4-device process) refuses."""


def save(out: Path, name: str, result) -> None:
    leaves = jax.tree.leaves(jax.device_get(result.state.params))
    np.savez(out / f"{name}.npz", *leaves)
    env_leaf = jax.tree.leaves(result.state.env_state)[0]
    spec = getattr(env_leaf.sharding, "spec", None)
    record = {"summary": result.summary, "env_state_spec": [str(p) for p in spec] if spec is not None else None,
              "env_state_devices": len(env_leaf.sharding.device_set)}
    if getattr(result.state, "replay", None) is not None:
        for field, stored in (("reward", result.state.replay.reward),
                              ("obs", jax.tree.leaves(result.state.replay.obs)[0])):
            record[f"replay_{field}_spec"] = [str(p) for p in getattr(stored.sharding, "spec", ())]
            record[f"replay_{field}_shard_shape"] = list(stored.addressable_shards[0].data.shape)
            record[f"replay_{field}_shape"] = list(stored.shape)
            record[f"replay_{field}_dtype"] = str(stored.dtype)
    (out / f"{name}.json").write_text(json.dumps(record, default=str))


def save_models(out: Path, name: str, result) -> None:
    """The randomized model batch of a run's final state (one .npz per run) and how its fields are split."""
    models = result.state.env_state.models
    np.savez(out / f"{name}-models.npz", **{field: np.asarray(jax.device_get(value)) for field, value in models.items()})
    record = {field: {"spec": [str(p) for p in getattr(value.sharding, "spec", ())],
                      "shard_rows": int(value.addressable_shards[0].data.shape[0])} for field, value in models.items()}
    (out / f"{name}-models.json").write_text(json.dumps(record))


def step_bytes(overrides: list[str]) -> dict[int, dict[str, int]]:
    """XLA's per-device memory analysis of the compiled step on 1 and 2 devices (compiled, not run). It is
    compiled for the placed initial state, as `rlfit.train` compiles it, so the runs of the same overrides below
    load this very program from the compile cache instead of compiling it again."""
    from rlfit.config.schema import resolve
    from rlfit.planning.plan import make_plan
    from rlfit.run.trainer import Trainer

    sizes = {}
    for devices in (1, 2):
        config = resolve(TOY_ENV, "smoke", overrides=[*overrides, f"run.devices={devices}"])
        trainer = Trainer.build(config, make_plan(config))
        state = trainer.place(trainer.init_state())
        analysis = trainer.compile_iteration(state).memory_analysis()
        evaluation = trainer.compile_evaluator(state).memory_analysis()
        sizes[devices] = {"temp": int(analysis.temp_size_in_bytes), "arguments": int(analysis.argument_size_in_bytes),
                          "eval_temp": int(evaluation.temp_size_in_bytes)}
    return sizes


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    assert len(jax.devices()) == 4, jax.devices()
    configure_jax()  # the compile cache `rlfit.train` uses, from the first compile on
    (out / "step_bytes.json").write_text(json.dumps({"ppo": step_bytes(PPO), "sac": step_bytes(SAC)}))
    for devices in (1, 2, 4):
        save(out, f"ppo-{devices}", rlfit.train(TOY_ENV, "smoke", overrides=[*PPO, f"run.devices={devices}"],
                                                run_dir=out / f"ppo-{devices}", quiet=True))
    for devices in (1, 2):
        save(out, f"sac-{devices}", rlfit.train(TOY_ENV, "smoke", overrides=[*SAC, f"run.devices={devices}"],
                                                run_dir=out / f"sac-{devices}", quiet=True))
    save(out, "sac-pixels-2", rlfit.train(WEIGHTED_ENV, "smoke", overrides=[*SAC_PIXELS, "run.devices=2"],
                                          run_dir=out / "sac-pixels-2", quiet=True))
    for devices in (1, 2):  # domain randomization: each device steps its own share of the models
        name = f"ppo-randomized-{devices}"
        result = rlfit.train(WEIGHTED_ENV, "smoke", overrides=[*RANDOMIZED, f"run.devices={devices}"],
                             run_dir=out / name, quiet=True)
        save(out, name, result)
        save_models(out, name, result)
    # The same run split into sessions: 2 iterations on 1 device, then 2 on 2 devices, then 1 on 1 device.
    split = out / "ppo-1-2-1"
    rlfit.train(TOY_ENV, "smoke", overrides=[*PPO, "run.devices=1", "run.num_timesteps=5120"], run_dir=split,
                quiet=True)
    resume(split, iterations=4, overrides={"run": {"devices": "2"}})
    save(out, "ppo-1-2-1", resume(split, iterations=5, overrides={"run": {"devices": "1"}}))
    # Split on 2 devices both times: bit-identical to the straight 2-device run.
    same = out / "ppo-2-2"
    rlfit.train(TOY_ENV, "smoke", overrides=[*PPO, "run.devices=2", "run.num_timesteps=5120"], run_dir=same,
                quiet=True)
    save(out, "ppo-2-2", resume(same, iterations=5))

    refused = cli_in_process(None, "train", TOY_ENV, "--preset", "smoke", *[arg for o in REFUSED for arg in ("--set", o)],
                             "--run-dir", str(out / "refused"), cwd=out)
    (out / "refused.json").write_text(json.dumps({"returncode": refused.returncode, "stderr": refused.stderr}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
