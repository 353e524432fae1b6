"""FastTD3's presets against the values FastTD3 publishes (`fast_td3/hyperparams.py` of
github.com/younggyoseo/FastTD3, written out here by hand): BaseArgs for the default preset, MuJoCoPlaygroundArgs
(inherited by G1JoystickFlatTerrainArgs) for the g1 preset and for the default preset on Playground's humanoids.
Where rlfit differs on purpose, docs/algorithms/fasttd3.md says why; those keys are not listed here."""

from __future__ import annotations

import pytest

from rlfit.config.schema import resolve

BASE_ARGS = {
    "num_envs": 128, "batch_size": 32768, "learning_rate": 3e-4, "actor_learning_rate": 3e-4, "weight_decay": 0.1,
    "discounting": 0.99, "n_step": 1, "tau": 0.1, "grad_updates_per_step": 2, "policy_delay": 2,
    "policy_noise": 0.001, "noise_clip": 0.5, "std_min": 0.001, "std_max": 0.4, "num_atoms": 101,
    "v_min": -250.0, "v_max": 250.0, "clipped_double_q": True, "normalize_observations": True,
    "actor_init_scale": 0.01, "actor_hidden": (512, 256, 128), "critic_hidden": (1024, 512, 256),
    "max_replay_size": 1024 * 50 * 128,  # buffer_size is per environment
    "min_replay_size": 10 * 128,  # learning_starts: policy steps of every environment
}
"""BaseArgs; hidden_dim 512 / 1024 give layers of hidden_dim, hidden_dim // 2, hidden_dim // 4."""

PLAYGROUND_ARGS = {**BASE_ARGS, "num_envs": 1024, "discounting": 0.97, "v_min": -10.0, "v_max": 10.0,
                   "max_replay_size": 1024 * 10 * 1024, "min_replay_size": 10 * 1024}
"""MuJoCoPlaygroundArgs: BaseArgs with 1,024 environments, gamma 0.97, atoms on [-10, 10], 10 x 1,024 transitions
per environment; num_steps stays BaseArgs' 1."""


def fasttd3_values(config, keys) -> dict:
    return {key: getattr(config.fasttd3, key) for key in keys}


def test_the_default_preset_is_fasttd3s_base_settings():
    config = resolve("CartpoleBalance", "default", overrides=["algo=fasttd3"])
    assert fasttd3_values(config, BASE_ARGS) == BASE_ARGS


@pytest.mark.parametrize("preset", ["default", "g1"])
def test_g1_gets_fasttd3s_published_playground_settings(preset):
    config = resolve("G1JoystickFlatTerrain", preset, overrides=["algo=fasttd3"])
    assert fasttd3_values(config, PLAYGROUND_ARGS) == PLAYGROUND_ARGS


def test_the_g1_preset_runs_fasttd3s_length_in_bf16():
    config = resolve("G1JoystickFlatTerrain", "g1", overrides=["algo=fasttd3"])
    assert config.run.num_timesteps == 100_000 * 1024  # total_timesteps counts policy steps of 1,024 environments
    assert config.run.precision == "bf16"  # amp with amp_dtype bf16: networks computed in bf16, parameters fp32


@pytest.mark.parametrize(("env", "changes"), [
    ("Go1JoystickFlatTerrain", {"std_min": 0.2, "std_max": 0.8, "policy_noise": 0.2, "grad_updates_per_step": 8}),
    ("LeapCubeReorient", {"n_step": 3, "discounting": 0.99, "policy_noise": 0.2, "v_min": -50.0, "v_max": 50.0,
                          "clipped_double_q": False}),
    ("CheetahRun", {"n_step": 3, "v_min": -500.0, "v_max": 500.0, "std_min": 0.1, "policy_noise": 0.1}),
])
def test_the_default_preset_applies_fasttd3s_settings_for_the_tasks_it_names(env, changes):
    """Go1JoystickFlatTerrainArgs, LeapCubeReorientArgs, CheetahRunArgs: MuJoCoPlaygroundArgs and their changes."""
    expected = {**PLAYGROUND_ARGS, **changes}
    config = resolve(env, "default", overrides=["algo=fasttd3"])
    assert fasttd3_values(config, expected) == expected
