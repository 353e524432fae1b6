"""What a run's stored programs are keyed on (`Trainer.store_key`, `rlfit.config.schema.HOST_LOOP_FIELDS`).

The store leaves the host loop's settings out of a program's key, so that a longer run, a resume with more
iterations or another checkpoint interval reuses the stored programs. That is right only if no shipped algorithm
traces those settings into a program: checked here by lowering each algorithm's programs under two configs that
differ in every one of them, against the same lowering with a setting that does enter the program (which must
differ, or the comparison could not fail).
"""

from __future__ import annotations

import re

import pytest

from rlfit.config.algorithms import register_algorithm, unregister_algorithm
from rlfit.config.schema import HOST_LOOP_FIELDS, resolve
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer
from tests.conftest import TOY_ENV

HOST_LOOP_CHANGES = {
    "run.num_timesteps": "123456", "run.eval_every": "3", "run.save_interval": "7", "run.keep_checkpoints": "2",
    "run.continue_on_save_error": "true", "run.oom_backoff": "false", "run.checkpoint_replay": "false",
    "run.time_budget": "1h", "run.early_stop_patience": "4", "run.early_stop_min_delta": "0.5",
    "run.target_reward": "100", "run.wandb_project": "elsewhere", "run.wandb_entity": "someone",
    "run.wandb_group": "a-group", "run.wandb_timeout_s": "3", "run.stop_grace_s": "5",
}
"""A new value for every host-loop setting that can change without changing the plan (`fit_to_device` changes the
sizes, which are in the key; `wandb` needs W&B installed to be switched on)."""

PROGRAM_CHANGE = "env.episode_length=30"
"""A setting every training step reads (the time limit; the base is 20)."""


def lowered(algo: str, *overrides: str) -> tuple[str, str, dict]:
    """The training step's and the evaluation's StableHLO for the toy environment, and the config's
    program settings."""
    config = resolve(TOY_ENV, "smoke", overrides=[f"algo={algo}", "env.episode_length=20", *overrides])
    trainer = Trainer.build(config, make_plan(config))
    import jax

    step = jax.jit(trainer.train_iteration_fn(), donate_argnums=0).lower(trainer.abstract_state()).as_text()
    evaluation = without_locations(trainer.compile_evaluator().as_text())
    return step, evaluation, config.program_settings()


def without_locations(hlo: str) -> str:
    """Compiled HLO's text less its source locations: the metadata of each instruction and the tables of files,
    functions and stack frames (which name the lines of this test that built the config, and, for an executable
    read from the shared compile cache, those of the process that compiled it)."""
    hlo = re.sub(r", metadata=\{[^}]*\}", "", hlo)
    return "\n".join(line for line in hlo.splitlines() if not re.match(r"^\s*\d+ [{\"]", line))


def test_every_host_loop_setting_changed_here_is_one():
    assert {key.removeprefix("run.") for key in HOST_LOOP_CHANGES} | {"fit_to_device", "wandb"} == HOST_LOOP_FIELDS


@pytest.mark.parametrize("algo", ["ppo", "sac", "fasttd3"])
def test_no_shipped_algorithm_traces_a_host_loop_setting(algo):
    step, evaluation, settings = lowered(algo)
    changed = [f"{key}={value}" for key, value in HOST_LOOP_CHANGES.items()]
    step_after, evaluation_after, settings_after = lowered(algo, *changed)
    assert settings_after == settings  # the key does not see them ...
    assert step_after == step and evaluation_after == evaluation  # ... and the programs are the same
    other_step, _, other_settings = lowered(algo, PROGRAM_CHANGE)
    assert other_settings != settings and other_step != step  # a setting the step reads changes both


def test_programs_of_an_algorithm_or_environment_from_outside_rlfit_are_not_stored():
    config = resolve("CartpoleBalance", "smoke", overrides=["run.num_eval_envs=4"])
    trainer = Trainer.build(config, make_plan(config))
    key = trainer.store_key("training step")
    assert key is not None and trainer.model_digest is not None and trainer.model_digest in key
    toy = resolve(TOY_ENV, "smoke")
    assert Trainer.build(toy, make_plan(toy)).store_key("training step") is None  # a user's factory
    register_algorithm("detpg", "tests.algos.detpg")
    try:
        outsider = resolve("CartpoleBalance", "smoke", overrides=["algo=detpg", "run.num_eval_envs=4"])
        assert Trainer.build(outsider, make_plan(outsider)).store_key("training step") is None
    finally:
        unregister_algorithm("detpg")


def test_a_trainers_abstract_state_read_from_the_store_is_the_traced_one(tmp_path, monkeypatch):
    """The training state's shapes (every program is compiled for them) and the observation's (the networks are
    built for them) come from the store in a second process (here: a second Trainer) and equal those traced."""
    import jax

    from rlfit.hardware import program_store

    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path)
    config = resolve("gridworld:Empty-5x5", "smoke")

    def abstract(trainer):
        return [(leaf.shape, leaf.dtype, leaf.sharding) for leaf in jax.tree.leaves(trainer.abstract_state())]

    traced = Trainer.build(config, make_plan(config))
    reference = traced.abstract_of(jax.eval_shape(lambda: traced.learner.init(config.run.seed)))
    assert abstract(traced) == [(leaf.shape, leaf.dtype, leaf.sharding) for leaf in jax.tree.leaves(reference)]
    assert len(list(tmp_path.glob("*.shapes"))) == 2  # the state's and the observation's
    monkeypatch.setattr(jax, "eval_shape", lambda *a, **k: pytest.fail("traced again"))
    second = Trainer.build(config, make_plan(config))
    assert jax.tree.map(lambda x: (x.shape, x.dtype), second.obs_example) == jax.tree.map(
        lambda x: (x.shape, x.dtype), traced.obs_example)
    assert abstract(second) == abstract(traced)
    assert jax.tree.structure(second.abstract_state()) == jax.tree.structure(reference)
    # the programs compiled for these shapes are stored under their pickled structure: the same in both processes
    import pickle

    assert pickle.dumps(jax.tree.structure(second.abstract_state())) == pickle.dumps(
        jax.tree.structure(traced.abstract_state()))
