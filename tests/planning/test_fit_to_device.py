"""`run.fit_to_device` (set by the g1 preset) makes `rlfit train` size the run like `--num-envs auto`."""

from __future__ import annotations

import json

from rlfit.cli import main
from rlfit.config.schema import resolve

TOY = ["train", "tests.toy_env:make", "--preset", "smoke", "--set", "env.episode_length=50", "--quiet"]


def test_g1_preset_fits_to_the_device():
    assert resolve("G1JoystickFlatTerrain", "g1").run.fit_to_device is True
    assert resolve("CartpoleBalance", "quick").run.fit_to_device is False


def test_fit_to_device_plans_and_an_explicit_num_envs_wins(tmp_path):
    fitted, explicit = tmp_path / "fitted", tmp_path / "explicit"
    assert main([*TOY, "--set", "run.fit_to_device=true", "--run-dir", str(fitted)]) == 0
    plan = json.loads((fitted / "plan.json").read_text())
    assert plan["reasons"][0].startswith("num_envs auto") and plan["predicted_bytes"] > 0
    assert plan["sizes"]["num_envs"] != 8  # the planner's choice, not the smoke preset's 8

    assert main([*TOY, "--set", "run.fit_to_device=true", "--num-envs", "16", "--run-dir", str(explicit)]) == 0
    plan = json.loads((explicit / "plan.json").read_text())
    assert plan["sizes"]["num_envs"] == 16 and plan["reasons"] == ["sizes from the config", "preset smoke: named"]
