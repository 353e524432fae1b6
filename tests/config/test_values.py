"""Float config keys take finite numbers only: infinity and NaN, in every spelling YAML and Python's float accept,
are refused for every float field of every section, from --set, a config file, a preset, a manifest or a config
built in code, in one line naming the key and the value."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest
import yaml

from rlfit.config.algorithms import ALGORITHMS, config_module
from rlfit.config.schema import Config, from_layers, resolve, section_types, validate
from rlfit.config.values import to_type
from rlfit.errors import UserError
from tests.conftest import TOY_ENV, cli_in_process

NON_FINITE = (".inf", "-.inf", "+.inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN", "inf", "-inf", "Infinity",
              "-Infinity", "nan", "NaN", "1e999", "-1e999", "1.0e+999", "1" + "0" * 400)
"""What a user may write for a non-finite number: YAML 1.1's spellings, Python float's, and numbers too large
for a float."""


def takes_floats(hint) -> bool:
    return hint is float or float in typing.get_args(hint)


FLOAT_KEYS = [f"{section}.{name}" for section, cls in section_types().items()
              for name, hint in typing.get_type_hints(cls).items() if takes_floats(hint)]
"""Every float key of every section, from the dataclasses themselves (`float` and `float | None`)."""


def algo_of(key: str) -> str:
    section = key.split(".")[0]
    return section if section in ALGORITHMS else "ppo"


def test_the_spellings_are_non_finite_as_the_parsers_read_them():
    for text in NON_FINITE:
        value = yaml.safe_load(text)
        number = float(value) if not isinstance(value, int) or abs(value) < 10**300 else math.inf
        assert not math.isfinite(number), text


def test_every_section_and_its_float_keys_are_found():
    sections = {key.split(".")[0] for key in FLOAT_KEYS}
    assert {"ppo", "sac", "run"} <= sections  # `network` (the encoder) has none
    assert {"ppo.reward_scaling", "ppo.learning_rate", "ppo.bottleneck_beta", "sac.target_entropy",
            "run.wandb_timeout_s"} <= set(FLOAT_KEYS)


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_set_refuses_every_non_finite_spelling_for_every_float_key(key):
    for text in NON_FINITE:
        with pytest.raises(UserError) as error:
            resolve(TOY_ENV, "smoke", overrides=[f"algo={algo_of(key)}", f"{key}={text}"])
        message = str(error.value)
        assert message.startswith(f"{key} must be a finite number, got "), message
        assert "\n" not in message


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_a_config_file_refuses_them_too(key, tmp_path):
    section, name = key.split(".")
    path = tmp_path / "config.yaml"
    path.write_text(f"algo: {algo_of(key)}\n{section}:\n  {name}: -.inf\n")
    with pytest.raises(UserError, match=rf"^{key} must be a finite number, got -inf"):
        resolve(TOY_ENV, "smoke", config_file=path)


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_a_config_built_in_code_is_refused_at_validation(key):
    section, name = key.split(".")
    config = Config(algo=algo_of(key))
    changed = dataclasses.replace(getattr(config, section), **{name: math.nan})
    if section in ALGORITHMS:
        config = dataclasses.replace(config, algos={**config.algos, section: changed})
    else:
        config = dataclasses.replace(config, **{section: changed})
    with pytest.raises(UserError, match=rf"^{key} must be a finite number, got nan"):
        validate(config)


def test_a_preset_layer_with_infinity_is_refused(monkeypatch):
    presets = {**config_module("ppo").PRESETS, "broken": {"ppo": {"reward_scaling": math.inf}}}
    monkeypatch.setattr(config_module("ppo"), "PRESETS", presets)
    with pytest.raises(UserError, match=r"^ppo.reward_scaling must be a finite number, got inf"):
        resolve(TOY_ENV, "broken")
    with pytest.raises(UserError, match=r"^run.early_stop_min_delta must be a finite number"):
        from_layers([{"run": {"early_stop_min_delta": float("-inf")}}])


def test_finite_values_and_none_still_pass():
    config = resolve(TOY_ENV, "smoke", overrides=["algo=sac", "sac.target_entropy=-1.5", "sac.tau=1e-3",
                                                  "run.wandb_timeout_s=2"])
    assert config.sac.target_entropy == -1.5 and config.sac.tau == 1e-3 and config.run.wandb_timeout_s == 2.0
    assert resolve(TOY_ENV, "smoke", overrides=["algo=sac", "sac.target_entropy=null"]).sac.target_entropy is None
    assert to_type("k", float, "3e-4") == 3e-4 and to_type("k", float | None, None) is None


def test_an_optional_float_refuses_text_in_one_line():
    with pytest.raises(UserError, match=r"^sac.target_entropy must be a number, got 'foo'$"):
        resolve(TOY_ENV, "smoke", overrides=["algo=sac", "sac.target_entropy=foo"])


def test_a_manifest_refuses_infinity_in_set_and_grid_before_anything_runs():
    from rlfit.study.experiment import check_manifest
    from rlfit.study.manifest import parse_manifest

    base = {"name": "study", "env": TOY_ENV, "preset": "smoke", "seeds": 1,
            "variants": [{"name": "a", "set": {}}]}
    for raw in ({**base, "set": {"ppo.reward_scaling": yaml.safe_load(".inf")}},
                {**base, "variants": [{"name": "a", "set": {"ppo.reward_scaling": float("nan")}}]}):
        with pytest.raises(UserError, match=r"ppo.reward_scaling must be a finite number, got (inf|nan)"):
            check_manifest(parse_manifest(raw))


def test_train_refuses_infinity_as_a_user_sees_it(capfd, tmp_path):
    result = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", "--set", "ppo.reward_scaling=.inf",
                            "--run-dir", "run", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("rlfit: error: ppo.reward_scaling must be a finite number, got inf; "
                                     "give a number such as 0.5 or 1e-3")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("written, read", [("off", "off"), ("no", "off"), ("auto", "auto")])
def test_yamls_booleans_in_a_text_key_read_as_the_word_off_or_on(written, read):
    """YAML 1.1 reads `off` as False: `--set env.randomization=off` and `run.wandb: off` mean off, not 'False'."""
    assert resolve("CartpoleBalance", "quick", overrides=[f"env.randomization={written}"]).env.randomization == read
    assert resolve("CartpoleBalance", "quick", overrides=[f"run.wandb={written}"]).run.wandb == read
    with pytest.raises(UserError, match="env.randomization must be auto, off or module:function, got 'on'"):
        resolve("CartpoleBalance", "quick", overrides=["env.randomization=on"])
