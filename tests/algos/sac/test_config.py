"""SACConfig: Brax's defaults, a docstring on every field, one-line errors for values SAC cannot train with."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest

from rlfit.algos.sac import config as config_module
from rlfit.algos.sac.config import SACConfig, check_sac_config
from rlfit.errors import UserError


def test_defaults_follow_brax_sac_train():
    config = SACConfig()
    assert (config.learning_rate, config.discounting, config.batch_size, config.tau) == (1e-4, 0.9, 256, 0.005)
    assert (config.min_replay_size, config.max_replay_size, config.grad_updates_per_step) == (0, 1_000_000, 1)
    assert (config.reward_scaling, config.normalize_observations, config.num_envs) == (1.0, False, 128)
    assert config.policy_hidden == config.q_hidden == (256, 256) and config.activation == "relu"
    assert config.resolved_target_entropy(6) == -3.0
    assert dataclasses.replace(config, target_entropy=-1.5).resolved_target_entropy(6) == -1.5
    check_sac_config(config)


def test_every_field_has_a_docstring():
    tree = ast.parse(inspect.getsource(config_module))
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "SACConfig").body
    documented = {body[i].target.id for i in range(len(body) - 1)
                  if isinstance(body[i], ast.AnnAssign) and isinstance(body[i + 1], ast.Expr)
                  and isinstance(body[i + 1].value, ast.Constant) and isinstance(body[i + 1].value.value, str)}
    assert documented == {field.name for field in dataclasses.fields(SACConfig)}


@pytest.mark.parametrize("changes, message", [
    ({"tau": 0.0}, "sac.tau"),
    ({"initial_alpha": 0.0}, "sac.initial_alpha"),
    ({"batch_size": 0}, "sac.batch_size"),
    ({"discounting": 1.5}, "sac.discounting"),
    ({"num_envs": 8, "max_replay_size": 15}, "at least 16"),
    ({"min_replay_size": 2_000_000}, "sac.min_replay_size"),
    ({"activation": "sigmoid"}, "sac.activation"),
])
def test_invalid_values_name_the_fix(changes, message):
    with pytest.raises(UserError, match=message):
        check_sac_config(dataclasses.replace(SACConfig(), **changes))
