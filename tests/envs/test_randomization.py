"""Domain randomization in the environment layer, on CartpoleBalance with a randomizer of the tests' own
(`tests/envs/randomizers.py`): the batch VecEnv draws, stepping each environment on its own model as Playground's
own wrapper (`BraxDomainRandomizationVmapWrapper`) does, and every bad randomizer refused in one line."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from rlfit.config.schema import EnvConfig
from rlfit.envs import load_env
from rlfit.envs.randomization import models_key, resolve_randomization
from rlfit.envs.vec_env import VecEnv
from rlfit.errors import UserError
from tests.envs import randomizers
from tests.toy_env import make as make_toy

N = 4
RANDOMIZER = "tests.envs.randomizers:scaled_masses"


@pytest.fixture(scope="module")
def cartpole():
    return load_env(EnvConfig(name="CartpoleBalance"), "cpu")


def test_each_environment_steps_on_its_own_model_as_playgrounds_wrapper_does(cartpole):
    """Reference: Playground's BraxDomainRandomizationVmapWrapper over the same models, reset keys and actions."""
    from mujoco_playground._src.wrapper import BraxDomainRandomizationVmapWrapper

    key = jax.random.PRNGKey(7)
    vec = VecEnv(cartpole, N, episode_length=1000, randomizer=randomizers.scaled_masses)
    actions = jax.random.uniform(jax.random.PRNGKey(1), (5, N, cartpole.action_size), minval=-1.0, maxval=1.0)

    # Each program steps in a `lax.scan` (one traced step each; a Python loop would compile every step).
    @jax.jit
    def ours(key):
        def step(state, action):
            state, out = vec.step(state, action)
            return state, out.next_obs

        state, observations = jax.lax.scan(step, vec.reset(key), actions)
        return state.models, observations

    models, observed = ours(key)
    model_keys = jax.random.split(models_key(key), N)
    expected_models, _ = randomizers.scaled_masses(cartpole.mjx_model, model_keys)
    assert set(models) == {"body_mass", "dof_damping"}
    for field, batch in models.items():
        np.testing.assert_array_equal(batch, getattr(expected_models, field))
    assert len({tuple(row) for row in np.asarray(models["body_mass"])}) == N  # a model per environment

    wrapped = BraxDomainRandomizationVmapWrapper(cartpole, functools.partial(randomizers.scaled_masses,
                                                                             keys=model_keys))

    @jax.jit
    def playgrounds(key):
        def step(state, action):
            state = wrapped.step(state, action)
            return state, state.obs

        state = wrapped.reset(jax.random.split(jax.random.split(key)[0], N))  # VecEnv.reset's episode keys
        return jax.lax.scan(step, state, actions)[1]

    np.testing.assert_allclose(observed, playgrounds(key), rtol=1e-6, atol=1e-6)

    nominal = VecEnv(cartpole, N, episode_length=1000)

    @jax.jit
    def on_the_nominal_model(key):
        def step(state, action):
            state, out = nominal.step(state, action)
            return state, out.next_obs

        return jax.lax.scan(step, nominal.reset(key), actions)[1][-1]

    assert not np.allclose(on_the_nominal_model(key), observed[-1])  # the models change what happens


def test_auto_is_off_with_a_note_where_playground_has_no_randomizer(cartpole):
    resolved = resolve_randomization("auto", "CartpoleBalance", cartpole, N)
    assert not resolved.enabled and resolved.source is None
    assert resolved.note == "domain randomization: off (CartpoleBalance has no randomizer in Playground)"
    toy = resolve_randomization("auto", "tests.toy_env:make", make_toy(), N)
    assert not toy.enabled and toy.note == ""  # no MuJoCo model: nothing to say


def test_playgrounds_line_for_an_environment_without_a_randomizer_goes_to_stderr(cartpole, capfd):
    """Playground prints "Env 'Op3Joystick' does not have a domain randomizer ..." to standard output (its locomotion
    registry's own code, run for a real name without a randomizer): standard output stays empty."""
    resolved = resolve_randomization("auto", "Op3Joystick", cartpole, N)
    out, err = capfd.readouterr()
    assert not resolved.enabled and out == ""
    assert "Op3Joystick' does not have a domain randomizer" in err


def test_a_users_randomizer_is_checked_and_described(cartpole):
    resolved = resolve_randomization(RANDOMIZER, "CartpoleBalance", cartpole, N)
    model = cartpole.mjx_model
    per_env = (model.body_mass.size + model.dof_damping.size) * 4  # float32
    assert resolved.enabled and resolved.source == RANDOMIZER
    assert resolved.fields == ("body_mass", "dof_damping") and resolved.bytes_per_env == per_env
    assert resolved.to_dict()["fields"] == ["body_mass", "dof_damping"]


@pytest.mark.parametrize("setting, message", [
    ("tests.envs.no_such_module:f", "cannot import module 'tests.envs.no_such_module'"),
    ("tests.envs.randomizers:absent", "has no function 'absent'"),
    ("tests.envs.randomizers:not_callable", "has no function 'not_callable'"),
    ("tests.envs.randomizers:fails", "failed: RuntimeError: the friction table is missing"),
    ("tests.envs.randomizers:model_only", "must return (model, in_axes), a pair"),
    ("tests.envs.randomizers:unbatched", "returned 'body_mass' of shape (3,) for 4 keys; expected (4, 3)"),
    ("tests.envs.randomizers:batches_nothing", "batched no field"),
])
def test_a_bad_randomizer_is_one_line(cartpole, setting, message):
    with pytest.raises(UserError) as raised:
        resolve_randomization(setting, "CartpoleBalance", cartpole, N)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_batch_of_the_wrong_size_is_refused(cartpole, monkeypatch):
    def one_too_many(model, keys):
        return randomizers.scaled_masses(model, jax.numpy.concatenate([keys, keys[:1]]))

    monkeypatch.setattr(randomizers, "one_too_many", one_too_many, raising=False)
    with pytest.raises(UserError, match=r"returned 'body_mass' of shape \(5, 3\) for 4 keys; expected \(4, 3\)"):
        resolve_randomization("tests.envs.randomizers:one_too_many", "CartpoleBalance", cartpole, N)


def test_randomizing_an_environment_without_a_model_is_refused():
    with pytest.raises(UserError, match="tests.toy_env:make has no MJX model to randomize; set env.randomization: off"):
        resolve_randomization(RANDOMIZER, "tests.toy_env:make", make_toy(), N)
