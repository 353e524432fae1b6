"""`env.overrides` checked against an environment's own settings without building it (rlfit.envs.overrides)."""

from __future__ import annotations

import pytest

from rlfit.envs.overrides import MAX_LISTED, check_env_config, check_env_overrides, unknown_key_message
from rlfit.errors import UserError


def factory_with_keywords(speed: float = 1.0, *, size: int = 5):
    raise AssertionError("never called: the check reads the signature")


def test_playground_keys_come_from_its_default_config_nested_ones_included():
    from mujoco_playground import registry

    config = registry.get_default_config("CartpoleBalance")
    nested = next(key for key, value in config.items() if hasattr(value, "items"))
    leaf = next(iter(config[nested]))
    check_env_overrides("CartpoleBalance", {"ctrl_dt": 0.02, f"{nested}.{leaf}": config[nested][leaf]})
    with pytest.raises(UserError) as error:
        check_env_overrides("CartpoleBalance", {"ctrl_td": 0.02})
    message = str(error.value)
    assert message.startswith("env.overrides names 'ctrl_td' (did you mean ctrl_dt?), which CartpoleBalance does not")
    assert all(key in message for key in config if not hasattr(config[key], "items"))
    assert f"{nested}.<key>" in message and "Other fields" not in message and "\n" not in message


def test_a_factorys_keywords_and_a_gridworlds_fields_are_the_valid_keys():
    name = f"{__name__}:factory_with_keywords"
    check_env_overrides(name, {"speed": 0.5, "size": 3})
    with pytest.raises(UserError, match="names 'sped' \\(did you mean speed\\?\\).*valid keys: speed, size$"):
        check_env_overrides(name, {"sped": 0.5})
    with pytest.raises(UserError, match="names 'density'.*valid keys: size, obstacle_density"):
        check_env_overrides("gridworld:Empty-5x5", {"density": 0.3})
    check_env_overrides("tests.toy_env:make", {"anything": 1})  # **overrides: checked when it is built


def test_an_unknown_environment_name_is_refused_with_the_closest_one():
    with pytest.raises(UserError, match="unknown environment 'CartpoleBalanse' \\(did you mean CartpoleBalance\\?\\)"):
        check_env_config("CartpoleBalanse", {})


def test_a_long_list_of_valid_keys_is_cut():
    valid = [f"key{i}" for i in range(MAX_LISTED + 5)]
    message = unknown_key_message("nope", "Env", valid)
    assert message.endswith("key23 and 5 more") and "key24" not in message
