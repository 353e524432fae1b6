"""Config layers and their precedence, Playground's published defaults, typo suggestions, types, rules."""

from __future__ import annotations

import dataclasses
import re

import pytest

from rlfit.cli import build_parser
from rlfit.cli.train import flag_overrides
from rlfit.config.algorithms import config_module
from rlfit.config.schema import Config, from_layers, resolve
from rlfit.algos.ppo.sizes import check_batch_divisibility
from rlfit.errors import UserError

PRESETS = config_module("ppo").PRESETS

TOY = "tests.toy_env:make"


def write(path, text):
    path.write_text(text)
    return path


# ---------------------------------------------------------------- layers and precedence

def test_precedence_defaults_preset_file_set(tmp_path):
    file = write(tmp_path / "c.yaml", "ppo:\n  num_envs: 256\n  learning_rate: 3e-4\nrun:\n  seed: 5\n")
    config = resolve(TOY, "quick", file, ["ppo.num_envs=128", "run.eval_every=7"])
    assert config.ppo.num_envs == 128  # --set beats the file
    assert config.ppo.learning_rate == pytest.approx(3e-4)  # the file beats the default
    assert config.run.seed == 5
    assert config.run.eval_every == 7  # --set beats the preset (quick: 5)
    assert config.ppo.batch_size == 256 and config.run.num_eval_envs == 32  # the preset beats the defaults
    assert config.ppo.gae_lambda == Config().ppo.gae_lambda  # untouched keys keep rlfit's defaults
    file_only = resolve(TOY, "quick", file)
    assert file_only.ppo.num_envs == 256  # the file beats the preset (quick: 512)
    assert resolve(TOY, "quick").ppo.num_envs == 512


def test_later_set_wins_and_flags_come_after_set():
    args = build_parser().parse_args(["train", TOY, "--preset", "smoke", "--set", "ppo.num_envs=4",
                                      "--num-envs", "16", "--set", "run.seed=3", "--seed", "9", "--timesteps", "640",
                                      "--set", "ppo.unroll_length=2", "--set", "ppo.unroll_length=3"])
    config = resolve(args.env, args.preset, args.config, flag_overrides(args))
    assert config.ppo.num_envs == 16 and config.run.seed == 9 and config.run.num_timesteps == 640
    assert config.ppo.unroll_length == 3


def test_playground_published_defaults_are_applied():
    from mujoco_playground.config import dm_control_suite_params, locomotion_params

    for name, params in (("CartpoleBalance", dm_control_suite_params), ("Go1JoystickFlatTerrain", locomotion_params)):
        published = params.brax_ppo_config(name, "jax")
        config = resolve(name)  # preset "default": Playground's settings as Brax users run them
        for key in ("num_envs", "batch_size", "num_minibatches", "unroll_length", "num_updates_per_batch",
                    "learning_rate", "entropy_cost", "discounting", "reward_scaling"):
            assert getattr(config.ppo, key) == pytest.approx(published[key]), (name, key)
        assert config.run.num_timesteps == published.num_timesteps
        assert config.env.episode_length == published.episode_length
    go1 = resolve("Go1JoystickFlatTerrain")
    published = locomotion_params.brax_ppo_config("Go1JoystickFlatTerrain", "jax")
    assert go1.ppo.max_grad_norm == published.max_grad_norm
    assert go1.ppo.policy_hidden == tuple(published.network_factory.policy_hidden_layer_sizes)
    assert go1.ppo.value_hidden == tuple(published.network_factory.value_hidden_layer_sizes)
    # CartpoleBalance publishes 60M steps, rlfit's default is 5M; a preset still wins over the published layer
    assert resolve("CartpoleBalance").run.num_timesteps == 60_000_000 != Config().run.num_timesteps
    assert resolve("CartpoleBalance", "quick").run.num_timesteps == PRESETS["quick"]["run"]["num_timesteps"]


# ---------------------------------------------------------------- unknown names

def message(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text, "a user error is one line"
    return text


def test_unknown_key_suggests_the_right_key():
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, overrides=["ppo.learnig_rate=0.1"])
    text = message(excinfo)
    assert "ppo.learnig_rate" in text and "ppo.learning_rate" in text


def test_unknown_key_in_a_file(tmp_path):
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, config_file=write(tmp_path / "c.yaml", "ppo:\n  policy_hiden: [8]\n"))
    assert "ppo.policy_hidden" in message(excinfo)


def test_unknown_section_suggests_the_section():
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, overrides=["pop.learning_rate=0.1"])
    text = message(excinfo)
    assert "'pop'" in text and "ppo" in text


def test_key_without_section():
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, overrides=["learning_rate=0.1"])
    assert "ppo.learning_rate" in message(excinfo)


def test_unknown_preset_suggests_one():
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, preset="quik")
    assert "quick" in message(excinfo)


def test_set_without_equals():
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, overrides=["ppo.num_envs"])
    assert "key=value" in message(excinfo)


# ---------------------------------------------------------------- types and YAML

@pytest.mark.parametrize(("item", "fragment"), [
    ("ppo.num_envs=abc", "ppo.num_envs must be an integer"),
    ("ppo.num_envs=2.5", "ppo.num_envs must be an integer"),
    ("ppo.num_envs=true", "ppo.num_envs must be an integer"),
    ("ppo.learning_rate=fast", "ppo.learning_rate must be a number"),
    ("ppo.normalize_observations=maybe", "ppo.normalize_observations must be true or false"),
    ("ppo.policy_hidden=abc", "ppo.policy_hidden must be a list of integers"),
    ("ppo.value_hidden=[32, x]", "ppo.value_hidden must be"),
    ("env.overrides=3", "env.overrides must be a mapping"),
])
def test_wrong_types_are_named(item, fragment):
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, overrides=[item])
    assert fragment in message(excinfo)


def test_numbers_in_yaml_and_set(tmp_path):
    file = write(tmp_path / "c.yaml", "ppo:\n  learning_rate: 3e-4\n  entropy_cost: 1E-3\n"
                                      "run:\n  num_timesteps: 1_000_000\n  eval_every: 2.0\n")
    config = resolve(TOY, config_file=file)
    assert config.ppo.learning_rate == pytest.approx(3e-4) and isinstance(config.ppo.learning_rate, float)
    assert config.ppo.entropy_cost == pytest.approx(1e-3)
    assert config.run.num_timesteps == 1_000_000 and config.run.eval_every == 2
    assert isinstance(config.run.eval_every, int)
    config = resolve(TOY, overrides=["ppo.learning_rate=3e-4", "ppo.clipping_epsilon=1", "run.num_timesteps=2e6",
                                     "ppo.policy_hidden=[8, 4]", "ppo.value_hidden=16"])
    assert config.ppo.learning_rate == pytest.approx(3e-4)
    assert config.ppo.clipping_epsilon == 1.0 and isinstance(config.ppo.clipping_epsilon, float)
    assert config.run.num_timesteps == 2_000_000
    assert config.ppo.policy_hidden == (8, 4) and config.ppo.value_hidden == (16,)


@pytest.mark.parametrize(("text", "fragment"), [
    ("ppo: [unclosed\n", "malformed YAML in"),
    ("ppo:\n  num_envs: 4\n bad indent: 1\n", "malformed YAML in"),
    ("- a\n- b\n", "c.yaml must hold a mapping of sections"),
    ("ppo: 3\n", "config section 'ppo' must be a mapping of keys, got 3"),
])
def test_malformed_or_wrongly_shaped_yaml(tmp_path, text, fragment):
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, config_file=write(tmp_path / "c.yaml", text))
    assert fragment in message(excinfo)


def test_missing_config_file(tmp_path):
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, config_file=tmp_path / "nope.yaml")
    assert "nope.yaml" in message(excinfo)


def test_empty_yaml_file_is_refused(tmp_path):
    with pytest.raises(UserError, match="c.yaml is empty; give it sections"):
        resolve(TOY, config_file=write(tmp_path / "c.yaml", "# only a comment\n"))


def test_env_name_conflict_between_file_and_command_line(tmp_path):
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, config_file=write(tmp_path / "c.yaml", "env:\n  name: CartpoleBalance\n"))
    assert "env.name" in message(excinfo)


# ---------------------------------------------------------------- frozen

def test_config_is_frozen():
    config = resolve(TOY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.ppo.num_envs = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.ppo = config.ppo  # type: ignore[misc]
    overridden = resolve(TOY, overrides=["env.overrides={speed: 0.5}"])
    with pytest.raises(TypeError):
        overridden.env.overrides["speed"] = 1.0  # type: ignore[index]
    assert isinstance(config.ppo.policy_hidden, tuple)  # tuples, not lists


def test_replace_returns_a_validated_copy():
    config = resolve(TOY)
    other = config.replace(ppo={"learning_rate": 0.5})
    assert other.ppo.learning_rate == 0.5 and config.ppo.learning_rate != 0.5
    with pytest.raises(UserError):
        config.replace(ppo={"num_envs": 0})


def test_to_dict_round_trips():
    config = resolve(TOY, "quick", None, ["env.overrides={speed: 0.5}", "ppo.policy_hidden=[8]"])
    assert from_layers([config.to_dict()]) == config


# ---------------------------------------------------------------- rules

@pytest.mark.parametrize(("item", "fragment"), [
    ("ppo.num_envs=-4", "ppo.num_envs must be a positive integer"),
    ("ppo.num_envs=0", "ppo.num_envs must be a positive integer"),
    ("run.num_timesteps=0", "run.num_timesteps must be a positive integer"),
    ("ppo.unroll_length=-1", "ppo.unroll_length must be a positive integer"),
    ("ppo.learning_rate=0", "ppo.learning_rate must be greater than 0"),
    ("ppo.discounting=1.5", "ppo.discounting must be in (0, 1]"),
    ("ppo.entropy_cost=-0.1", "ppo.entropy_cost must be zero or more"),
    ("ppo.activation=sigmoidal", "ppo.activation must be one of"),
    ("env.impl=cuda", "env.impl must be one of"),
    ("ppo.advantages=gae", "ppo.advantages must be one of brax, gae_once, got 'gae'"),
    ("ppo.learning_rate_schedule=cosine", "ppo.learning_rate_schedule must be one of none, adaptive_kl, linear, got 'cosine'"),
    ("ppo.desired_kl=0", "ppo.desired_kl must be greater than 0"),
    ("ppo.learning_rate_schedule_min_lr=0.1", "ppo.learning_rate_schedule_min_lr (0.1) is above "
                                              "ppo.learning_rate_schedule_max_lr (0.01)"),
    ("ppo.policy_hidden=[]", "ppo.policy_hidden must be a non-empty list"),
    ("ppo.value_hidden=[8, 0]", "ppo.value_hidden must be a non-empty list"),
])
def test_invalid_values_are_refused_with_the_rule(item, fragment):
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, overrides=[item])
    assert fragment in message(excinfo)


def nearest_valid(value, is_valid, limit=10_000):
    """The nearest valid values below and above `value`, by brute force."""
    below = next((v for v in range(value - 1, 0, -1) if is_valid(v)), None)
    above = next((v for v in range(value + 1, limit) if is_valid(v)), None)
    return {v for v in (below, above) if v is not None}


@pytest.mark.parametrize(("num_envs", "batch_size", "num_minibatches"), [(48, 32, 4), (7, 8, 2), (512, 100, 3)])
def test_batch_divisibility_offers_the_nearest_valid_values(num_envs, batch_size, num_minibatches):
    with pytest.raises(UserError) as excinfo:
        check_batch_divisibility(num_envs, batch_size, num_minibatches)
    text = message(excinfo)
    assert "divisible" in text and str(num_envs) in text
    offered: dict[str, set[int]] = {}
    for key, value in re.findall(r"(num_minibatches|batch_size|num_envs)=(\d+)", text):
        offered.setdefault(key, set()).add(int(value))
    assert offered["num_minibatches"] == nearest_valid(num_minibatches,
                                                       lambda m: batch_size * m % num_envs == 0)
    assert offered["batch_size"] == nearest_valid(batch_size, lambda b: b * num_minibatches % num_envs == 0)
    assert offered["num_envs"] == nearest_valid(num_envs, lambda n: batch_size * num_minibatches % n == 0,
                                                limit=batch_size * num_minibatches + 1)
    for key, values in offered.items():
        for value in values:
            sizes = {"num_envs": num_envs, "batch_size": batch_size, "num_minibatches": num_minibatches, key: value}
            check_batch_divisibility(**sizes)  # every offered fix is valid


def test_batch_divisibility_through_resolve():
    with pytest.raises(UserError) as excinfo:
        resolve(TOY, "smoke", None, ["ppo.num_envs=6"])
    assert "nearest valid" in message(excinfo)


CARTPOLE = "CartpoleBalance"
PRESET_VALUES = {
    ("ppo", "quick"): {"ppo.num_envs": 512, "ppo.batch_size": 256, "ppo.num_minibatches": 16,
                       "ppo.num_updates_per_batch": 8, "ppo.value_hidden": (64, 64),
                       "run.num_timesteps": 10_000_000, "run.num_eval_envs": 32},
    ("ppo", "production"): {"ppo.num_envs": 8192, "ppo.batch_size": 2048, "ppo.num_minibatches": 32,
                            "run.eval_every": 20},
    ("ppo", "g1"): {"ppo.num_envs": 1024, "ppo.learning_rate": 3e-4, "ppo.clipping_epsilon": 0.2,
                    "ppo.max_grad_norm": 1.0, "ppo.policy_hidden": (256, 256, 256),
                    "run.num_timesteps": 163_840_000, "run.fit_to_device": True},
    ("ppo", "smoke"): {"ppo.num_envs": 8, "ppo.unroll_length": 4, "env.episode_length": 100, "run.num_timesteps": 64},
    ("sac", "quick"): {"sac.num_envs": 16, "sac.grad_updates_per_step": 4, "sac.min_replay_size": 1024,
                       "sac.q_hidden": (128, 128), "sac.discounting": 0.99, "run.num_timesteps": 400_000},
    ("sac", "production"): {"sac.num_envs": 1024, "sac.batch_size": 1024, "sac.grad_updates_per_step": 16,
                            "run.eval_every": 20},
    ("sac", "pixels"): {"env.observation": "pixels", "env.image_size": 64, "env.frames": 3, "env.action_repeat": 8,
                        "sac.num_envs": 1, "sac.learning_rate": 5e-4, "sac.tau": 0.01, "sac.q_layer_norm": False,
                        "run.num_timesteps": 100_000},
    ("sac", "smoke"): {"sac.num_envs": 8, "sac.max_replay_size": 512, "sac.policy_hidden": (32, 32),
                       "run.num_timesteps": 64},
}
"""Values each preset gives CartpoleBalance, written out by hand (the 'default' presets: Playground's own,
checked against mujoco_playground below)."""


def built_in_presets() -> list[tuple[str, str]]:
    return [(algo, preset) for algo in ("ppo", "sac") for preset in config_module(algo).PRESETS]


def value_of(config: Config, dotted: str):
    section, key = dotted.split(".")
    return getattr(getattr(config, section), key)


def test_every_preset_has_its_values_written_out():
    assert set(PRESET_VALUES) | {("ppo", "default"), ("sac", "default")} == set(built_in_presets())


@pytest.mark.parametrize("algo, preset", [pair for pair in built_in_presets() if pair[1] != "default"])
def test_every_preset_resolves_validates_and_its_values_arrive(algo, preset):
    from rlfit.config.schema import validate

    config = resolve(CARTPOLE, preset, overrides=[f"algo={algo}"])
    validate(config)  # resolve validated it; a second time is the same config
    assert config.algo == algo and config.env.name == CARTPOLE
    for dotted, expected in PRESET_VALUES[(algo, preset)].items():
        assert value_of(config, dotted) == pytest.approx(expected), dotted


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_the_default_preset_is_playgrounds_published_settings(algo):
    from mujoco_playground.config import dm_control_suite_params

    published = (dm_control_suite_params.brax_ppo_config(CARTPOLE, "jax") if algo == "ppo" else
                 dm_control_suite_params.brax_sac_config(CARTPOLE))
    config = resolve(CARTPOLE, "default", overrides=[f"algo={algo}"])
    section = getattr(config, algo)
    for key in ("num_envs", "batch_size", "learning_rate", "discounting", "reward_scaling", "normalize_observations"):
        assert getattr(section, key) == pytest.approx(published[key]), key
    assert config.run.num_timesteps == published["num_timesteps"]
    assert config.env.episode_length == published["episode_length"]


def test_algo_sac_config_round_trips_and_holds_only_its_own_section():
    config = resolve(TOY, "quick", overrides=["algo=sac", "sac.batch_size=64"])
    assert config.algo == "sac" and config.sac.batch_size == 64
    saved = config.to_dict()
    assert list(saved) == ["algo", "env", "sac", "network", "run"]
    assert from_layers([saved]) == config


def test_a_config_without_algo_is_ppo(tmp_path):
    """config.yaml files written before `algo` existed resume as PPO runs."""
    old = resolve(TOY, "quick").to_dict()
    del old["algo"]
    assert from_layers([old]).algo == "ppo"


def test_resume_names_a_changed_algorithm():
    from rlfit.run.restore import differences

    ppo, sac = resolve(TOY, "smoke"), resolve(TOY, "smoke", overrides=["algo=sac"])
    assert differences(ppo, sac)[0] == ("algo", "ppo", "sac")


@pytest.mark.parametrize(("overrides", "message"), [
    (["ppo.bottleneck_beta=0.1"], "ppo.bottleneck is 0"),
    (["ppo.bottleneck=-1"], "ppo.bottleneck must be zero or more"),
    (["ppo.bottleneck=8", "ppo.bottleneck_beta=-1"], "ppo.bottleneck_beta must be zero or more"),
    (["ppo.bottleneck=8", "env.observation=pixels"], "ppo.bottleneck works on vector observations"),
    (["ppo.bottleneck=8", "algo=sac"], "ppo.bottleneck is a setting of algo ppo, but this run's algo is sac"),
])
def test_information_bottleneck_settings_are_checked(overrides, message):
    with pytest.raises(UserError, match=re.escape(message)):
        resolve(TOY, overrides=overrides)
