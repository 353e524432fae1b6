"""rlfit.envs.loading's key for the program store: what a loaded environment's observation depends on, so that a
later process (play, transfer-check) reads the observation's shapes instead of tracing the reset again."""

from __future__ import annotations

import dataclasses

import pytest

from rlfit.config.schema import EnvConfig
from rlfit.envs.loading import observation_store_key
from rlfit.errors import UserError


class ModelOnly:
    """An environment as the key sees it: its MuJoCo model."""

    def __init__(self, mass: str = "1"):
        import mujoco

        self.mj_model = mujoco.MjModel.from_xml_string(
            f'<mujoco><worldbody><body><joint type="slide"/><geom size="0.1" mass="{mass}"/></body></worldbody>'
            "</mujoco>")


def test_the_key_changes_with_every_setting_and_the_model_and_only_with_them():
    config = EnvConfig(name="CartpoleBalance")
    key = observation_store_key(config, ModelOnly(), "cpu")
    assert key is not None and key == observation_store_key(EnvConfig(name="CartpoleBalance"), ModelOnly(), "cpu")
    assert key == observation_store_key(dataclasses.replace(config, impl="jax"), ModelOnly(), "cpu")  # auto -> jax
    others = [dataclasses.replace(config, name="CartpoleSwingup"), dataclasses.replace(config, overrides={"x": 1}),
              dataclasses.replace(config, observation_set="robot"), dataclasses.replace(config, observation="pixels"),
              dataclasses.replace(config, image_size=32), dataclasses.replace(config, frames=2)]
    keys = {observation_store_key(other, ModelOnly(), "cpu") for other in others}
    assert len(keys) == len(others) and key not in keys
    assert observation_store_key(config, ModelOnly(mass="2"), "cpu") not in (key, *keys)


@pytest.mark.parametrize("name", ["tests.toy_env:make", "gymnax:Pendulum-v1"])
def test_a_name_with_a_colon_has_no_key(name):
    assert observation_store_key(EnvConfig(name=name), ModelOnly(), "cpu") is None


def test_play_reads_the_observation_shapes_a_process_before_it_traced(tmp_path, monkeypatch):
    """`load_play_env` (play's, and transfer-check's, loading): the second load finds the shapes the first one kept
    in the program store and traces no reset."""
    from rlfit.config.schema import resolve
    from rlfit.deploy.play.session import load_play_env
    from rlfit.hardware import program_store

    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path)
    config = resolve("CartpoleBalance", "smoke")
    load_play_env(config, None, {"obs": (5,)})
    assert len(list(tmp_path.glob("*.shapes"))) == 1

    def traced(*args, **kwargs):
        raise AssertionError("the reset was traced again")

    monkeypatch.setattr(program_store.jax, "eval_shape", traced)
    load_play_env(config, None, {"obs": (5,)})
    monkeypatch.undo()
    with pytest.raises(UserError, match=r"the policy expects observations \{'obs': \(4,\)\} but CartpoleBalance gives "
                                         r"\{'obs': \(5,\)\}"):  # the kept shapes are checked as traced ones are
        load_play_env(config, None, {"obs": (4,)})
