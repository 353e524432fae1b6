"""One process, one environment: `train --num-envs auto` loads the environment once for planning, training and an
out-of-memory back-off alike, and configures JAX once (`rlfit.planning.device_plan.Planned.env`)."""

from __future__ import annotations

import jax
import pytest

from tests.conftest import TOY_ENV

pytestmark = pytest.mark.slow


def test_num_envs_auto_with_a_back_off_loads_the_environment_once_and_configures_jax_once(tmp_path, monkeypatch):
    """The toy factory counts its calls; RESOURCE_EXHAUSTED is injected into the first compile of training's step
    (at the planner's choice), so the run backs off from its starting checkpoint to half the environments."""
    import rlfit
    import tests.toy_env as toy
    from rlfit.run.trainer import Trainer

    loads = []
    real_make = toy.make
    monkeypatch.setattr(toy, "make", lambda **overrides: loads.append(overrides) or real_make(**overrides))
    cache_settings = []
    real_update = jax.config.update
    monkeypatch.setattr(jax.config, "update", lambda name, value: (cache_settings.append(value) if
                                                                    name == "jax_compilation_cache_dir" else None)
                        or real_update(name, value))
    compiled_sizes = []
    real_compile = Trainer.compile

    def run_out_once(self, state=None, say=None, **options):
        compiled_sizes.append(self.plan.sizes.num_envs)
        if len(compiled_sizes) == 1:
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: injected at the planner's choice")
        return real_compile(self, state, say, **options)

    monkeypatch.setattr(Trainer, "compile", run_out_once)
    result = rlfit.train(TOY_ENV, "smoke", overrides=["run.num_timesteps=1", "run.num_eval_envs=4"],
                         run_dir=tmp_path / "run", num_envs_auto=True)
    events = result.summary["events"]
    assert [(e["from"]["num_envs"], e["to"]["num_envs"]) for e in events] == [(compiled_sizes[0],
                                                                                compiled_sizes[0] // 2)]
    assert result.summary["sizes"]["num_envs"] == compiled_sizes[0] // 2
    assert len(loads) == 1  # planning loaded it; training and the back-off's restore built on it
    assert len(cache_settings) == 1  # configure_jax ran once, before planning
