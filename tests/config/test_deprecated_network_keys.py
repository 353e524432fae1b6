"""PPO's network settings under their old names (`network.policy_hidden` ..., now `ppo.*`): still read, with one
note per process (`rlfit.config.moved_keys`). The only tests that use the old names on purpose."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from rlfit.config.moved_keys import forget_announced
from rlfit.config.schema import resolve
from rlfit.errors import UserError

TOY = "tests.toy_env:make"
OLD_TO_NEW = {"policy_hidden": [8, 4], "value_hidden": [16], "activation": "tanh", "policy_obs_key": "obs",
              "value_obs_key": "critic", "bottleneck": 3, "bottleneck_beta": 0.25}
"""Every moved key with a value other than its default (and than the smoke preset's)."""
NOTE = ("rlfit: note: network.policy_hidden, network.value_hidden are now ppo.policy_hidden, ppo.value_hidden; "
        "the old names still work")


@pytest.fixture(autouse=True)
def fresh_process():
    """Each test as a fresh process: no old key named yet."""
    forget_announced()
    yield
    forget_announced()


def note_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "the old names still work" in line]


def test_every_old_key_is_read_as_its_ppo_key_from_set_and_from_a_file(tmp_path, capsys):
    by_set = resolve(TOY, "smoke", overrides=[f"network.{key}={json.dumps(value)}" for key, value in OLD_TO_NEW.items()])
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"network": OLD_TO_NEW}))
    by_file = resolve(TOY, "smoke", config_file=path)
    for config in (by_set, by_file):
        written = config.to_dict()
        assert {key: written["ppo"][key] for key in OLD_TO_NEW} == OLD_TO_NEW
        assert sorted(written["network"]) == ["encoder", "encoder_features", "freeze_encoder", "pretrained"]
    assert by_set == by_file == resolve(TOY, "smoke", overrides=[f"ppo.{k}={json.dumps(v)}" for k, v in OLD_TO_NEW.items()])
    olds = ", ".join(f"network.{key}" for key in OLD_TO_NEW)
    news = ", ".join(f"ppo.{key}" for key in OLD_TO_NEW)
    assert note_lines(capsys.readouterr().err) == [f"rlfit: note: {olds} are now {news}; the old names still work"]


def test_the_note_is_printed_once_per_process(capsys):
    first = resolve(TOY, "smoke", overrides=["network.policy_hidden=[8]", "network.value_hidden=[8]"])
    again = resolve(TOY, "smoke", overrides=["network.policy_hidden=[8]", "network.value_hidden=[8]"])
    first.replace(run={"eval_every": 3})
    assert first == again and first.ppo.policy_hidden == (8,)
    assert capsys.readouterr().err.splitlines() == [NOTE]
    resolve(TOY, "smoke", overrides=["ppo.policy_hidden=[8]"])  # the new names: no note
    assert capsys.readouterr().err == ""


def test_an_old_key_still_overrides_a_lower_layer(capsys):
    """The smoke preset sets ppo.policy_hidden; --set network.policy_hidden, a later layer, wins as it did."""
    assert resolve(TOY, "smoke").ppo.policy_hidden == (32, 32)
    assert resolve(TOY, "smoke", overrides=["network.policy_hidden=[5]"]).ppo.policy_hidden == (5,)


def test_with_both_names_in_one_layer_the_new_one_wins_and_the_note_says_so(tmp_path, capsys):
    config = resolve(TOY, "smoke", overrides=["network.policy_hidden=[5]", "ppo.policy_hidden=[7]"])
    assert config.ppo.policy_hidden == (7,)
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump({"network": {"value_hidden": [5]}, "ppo": {"value_hidden": [7]}}))
    assert resolve(TOY, "smoke", config_file=path).ppo.value_hidden == (7,)
    lines = note_lines(capsys.readouterr().err)
    assert lines == ["rlfit: note: network.policy_hidden is now ppo.policy_hidden; the old names still work; "
                     "ppo.policy_hidden given too, so the new name wins",
                     "rlfit: note: network.value_hidden is now ppo.value_hidden; the old names still work; "
                     "ppo.value_hidden given too, so the new name wins"]


@pytest.mark.parametrize("algo", ["sac", "fasttd3"])
def test_other_algorithms_drop_the_old_keys_as_they_ignored_them(algo, capsys):
    plain = resolve(TOY, "smoke", overrides=[f"algo={algo}"])
    old = [f"network.{key}={json.dumps(value)}" for key, value in OLD_TO_NEW.items() if key != "bottleneck"]
    with_old = resolve(TOY, "smoke", overrides=[f"algo={algo}", *old, "network.bottleneck=0"])
    assert with_old == plain and "ppo" not in with_old.to_dict()
    (line,) = note_lines(capsys.readouterr().err)
    assert line.endswith("this run's algorithm does not read them (as before)")


@pytest.mark.parametrize("algo", ["sac", "fasttd3"])
def test_other_algorithms_refuse_a_bottleneck_in_one_line(algo):
    with pytest.raises(UserError) as refused:
        resolve(TOY, "smoke", overrides=[f"algo={algo}", "network.bottleneck=8"])
    assert str(refused.value).startswith("network.bottleneck is a PPO option (ppo.bottleneck; ")
    assert str(refused.value).endswith("set network.bottleneck: 0 or use algo: ppo") and "\n" not in str(refused.value)


def old_layout(config: dict) -> dict:
    """A config as rlfit wrote it before the move: PPO's network keys in `network`."""
    config = {section: dict(keys) if isinstance(keys, dict) else keys for section, keys in config.items()}
    for key in OLD_TO_NEW:
        config["network"][key] = config["ppo"].pop(key)
    return config


def test_a_run_directory_saved_in_the_old_layout_resumes_and_plays(tmp_path, capfd):
    from rlfit.deploy.play.session import read_run_config
    from tests.conftest import cli_in_process

    run = tmp_path / "run"
    toy = ["train", TOY, "--preset", "smoke", "--set", "env.episode_length=50", "--set", "ppo.policy_hidden=[16]",
           "--set", "run.save_interval=1", "--quiet"]
    trained = cli_in_process(capfd, *toy, "--timesteps", "128", "--run-dir", str(run), cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    saved = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump(old_layout(saved), sort_keys=False))
    for meta_path in (run / "checkpoints").glob("*/meta.json"):
        meta = json.loads(meta_path.read_text())
        meta_path.write_text(json.dumps({**meta, "config": old_layout(meta["config"])}))
    assert "policy_hidden" in yaml.safe_load((run / "config.yaml").read_text())["network"]
    played_copy = tmp_path / "played"
    shutil.copytree(run, played_copy)

    resumed = cli_in_process(capfd, "resume", str(run), "--timesteps", "256", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert len(note_lines(resumed.stderr)) == 1  # config.yaml and the checkpoint's record: one note
    assert json.loads((run / "summary.json").read_text())["env_steps"] == 256
    rewritten = yaml.safe_load((run / "config.yaml").read_text())
    assert rewritten["ppo"]["policy_hidden"] == [16] and "policy_hidden" not in rewritten["network"]

    forget_announced()
    config = read_run_config(played_copy)  # what `rlfit play` reads of the run
    assert config.ppo.policy_hidden == (16,)
    assert len(note_lines(capfd.readouterr().err)) == 1
