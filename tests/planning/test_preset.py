"""The preset a run takes when none is named: quick on a CPU, Playground's published settings on a GPU (sized down
only where they do not fit), a named preset (flag or config file) always winning; recorded in plan.json and
summary.json, and shown by `rlfit plan`."""

from __future__ import annotations

import json

import pytest

import rlfit
from rlfit.algos.ppo.config import PRESETS as PPO_PRESETS
from rlfit.config.schema import resolve
from rlfit.planning.preset import choose_preset
from rlfit.run.session import preset_for_device
from rlfit.planning.device_plan import plan_for
from rlfit.run.probes import StepProbes
from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES, cli_in_process


def test_a_named_preset_always_wins():
    for backend in ("cpu", "gpu", "tpu"):
        choice = choose_preset("smoke", PPO_PRESETS, backend)
        assert (choice.name, choice.by_device) == ("smoke", False)


def test_a_cpu_gets_quick_and_an_accelerator_playgrounds_settings():
    assert choose_preset(None, PPO_PRESETS, "cpu")[:1] == ("quick",)
    assert choose_preset(None, PPO_PRESETS, "gpu")[:1] == ("default",)
    assert choose_preset(None, PPO_PRESETS, "tpu")[:1] == ("default",)
    assert choose_preset(None, {"default": {}, "smoke": {}}, "cpu")[:1] == ("default",)  # an algorithm without quick
    assert all(choose_preset(None, PPO_PRESETS, b).by_device for b in ("cpu", "gpu"))


def test_the_preset_chosen_on_this_cpu_is_quicks_config():
    choice = preset_for_device("CartpoleBalance", None)
    assert choice.name == "quick" and "CPU" in choice.reason
    config = resolve("CartpoleBalance", choice.name)
    assert config.ppo.num_envs == PPO_PRESETS["quick"]["ppo"]["num_envs"]
    assert config.ppo.num_updates_per_batch == PPO_PRESETS["quick"]["ppo"]["num_updates_per_batch"]
    assert resolve("CartpoleBalance").ppo.num_envs != config.ppo.num_envs  # resolve alone keeps "default"


def test_a_config_file_naming_a_preset_wins_over_the_device(tmp_path):
    file = tmp_path / "run.yaml"
    file.write_text("preset: smoke\nrun: {seed: 3}\n")
    assert preset_for_device("CartpoleBalance", None, file).name == "smoke"
    assert preset_for_device("CartpoleBalance", "default", file).name == "default"  # the flag wins over the file
    config = resolve("CartpoleBalance", None, file)
    assert config.ppo.num_envs == PPO_PRESETS["smoke"]["ppo"]["num_envs"] and config.run.seed == 3


def test_a_config_files_preset_must_be_a_name(tmp_path, capfd):
    file = tmp_path / "run.yaml"
    file.write_text("preset: [quick]\n")
    result = cli_in_process(capfd, "train", "CartpoleBalance", "--config", str(file), "--run-dir", "r", cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "preset" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "r").exists()


def test_train_without_a_preset_records_the_choice(tmp_path, capsys):
    """quick and smoke differ only in `ppo.advantages` beside what TOY_TRAIN_OVERRIDES sets: set to smoke's, both runs
    compile one program (the second reads it from the compile cache)."""
    result = rlfit.train(TOY_ENV, overrides=[*TOY_TRAIN_OVERRIDES, "run.num_timesteps=2560", "ppo.advantages=brax"],
                         run_dir=tmp_path / "run", quiet=False, live=False)
    assert result.summary["preset"] == "quick"
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["preset"] == "quick" and plan["reasons"][-1].startswith("preset quick: no preset named")
    assert "rlfit: preset quick: no preset named" in capsys.readouterr().out
    named = rlfit.train(TOY_ENV, "smoke", overrides=[*TOY_TRAIN_OVERRIDES, "run.num_timesteps=2560"],
                        run_dir=tmp_path / "named", quiet=True)
    assert named.summary["preset"] == "smoke"
    assert json.loads((tmp_path / "named" / "plan.json").read_text())["reasons"][-1] == "preset smoke: named"


def test_plan_shows_the_same_choice(capfd, tmp_path):
    """`rlfit plan` (the CLI's main, in this process) on the toy environment: the preset does not depend on the
    environment, and the toy's step is lowered and bounded in a fraction of CartpoleBalance's time."""
    here = cli_in_process(capfd, "plan", TOY_ENV, "--json", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    planned = json.loads(here.stdout)
    assert planned["preset"]["name"] == "quick"
    assert planned["requested"]["num_envs"] == PPO_PRESETS["quick"]["ppo"]["num_envs"]
    gpu = cli_in_process(capfd, "plan", TOY_ENV, "--device-memory", "12GiB", "--json", cwd=tmp_path)
    assert gpu.returncode == 0, gpu.stderr
    planned = json.loads(gpu.stdout)
    assert planned["preset"]["name"] == "default"
    assert planned["requested"]["num_envs"] == resolve(TOY_ENV, "default").ppo.num_envs


@pytest.mark.parametrize("memory, shrunk", [("64GiB", False), ("4MiB", True)])
def test_shrink_to_fit_keeps_the_configs_sizes_where_they_fit(memory, shrunk):
    config = resolve(TOY_ENV, "smoke", overrides=[*TOY_TRAIN_OVERRIDES, "ppo.num_envs=4096", "ppo.batch_size=1024"])
    _, plan, _ = plan_for(config, StepProbes(), device_memory=memory, shrink_to_fit=True)
    assert (plan.sizes.num_envs < 4096) is shrunk, plan.reasons
    if shrunk:
        assert "do not fit this device" in plan.reasons[0]
        assert plan.predicted_bytes <= plan.extra["budget_bytes"]
