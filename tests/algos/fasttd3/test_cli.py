"""`--algo fasttd3` driven as a user drives it: plan sizes its replay buffer; its policy file holds the deterministic
actor as it is. Refusals, records, exact resume, export: tests/conformance/, for every algorithm."""

from __future__ import annotations

import json

import numpy as np

import rlfit
from rlfit.cli import main

TOY = "tests.toy_env:make"


def cli(capsys, *args: str) -> tuple[int, str]:
    try:
        code = main(list(args))
    except SystemExit as exit_:  # argparse usage errors
        code = exit_.code
    return code, capsys.readouterr().err


def test_plan_sizes_the_replay_buffer(capsys):
    code = main(["plan", TOY, "--algo", "fasttd3", "--preset", "smoke", "--set", "fasttd3.max_replay_size=100000"])
    out = capsys.readouterr().out
    assert code == 0
    assert "max_replay_size" in out and "100,000" in out


def test_the_policy_file_records_the_deterministic_head_and_acts_like_the_actor(capsys, tmp_path):
    """policy.json names `deterministic_tanh` and stores the actor as it is (A outputs, no scale head);
    `load_policy` gives tanh(actor(normalized obs)) computed here from the saved weights with numpy."""
    run = tmp_path / "run"
    code, err = cli(capsys, "train", TOY, "--algo", "fasttd3", "--preset", "smoke", "--num-envs", "4",
                    "--run-dir", str(run), "--quiet")
    assert code == 0, err
    spec = json.loads((run / "policy" / "policy.json").read_text())
    assert spec["network"]["head"] == "deterministic_tanh"
    assert spec["network"]["layer_sizes"][-1] == spec["action_size"]
    weights = np.load(run / "policy" / "weights.npz")
    layers = sorted({k.rsplit("/", 1)[0] for k in weights.files if k.endswith("/kernel")},
                    key=lambda name: int(name.rsplit("_", 1)[1]))
    assert weights[layers[-1] + "/kernel"].shape[-1] == spec["action_size"]  # no scale head stored
    count = float(weights["normalizer/count"])
    mean, m2 = weights["normalizer/mean"], weights["normalizer/sum_sq_dev"]
    std = np.clip(np.sqrt(m2 / count), 1e-6, 1e6) if count > 0 else np.ones_like(mean)
    obs = np.random.default_rng(0).normal(size=(5, mean.shape[-1])).astype(np.float32)
    x = (obs - mean) / std if count > 0 else obs
    for index, name in enumerate(layers):
        x = x @ weights[name + "/kernel"] + weights[name + "/bias"]
        if index < len(layers) - 1:
            x = np.maximum(x, 0.0)  # relu, the smoke preset's activation
    assert spec["network"]["activation"] == "relu"
    np.testing.assert_allclose(np.asarray(rlfit.load_policy(run)(obs)), np.tanh(x), atol=1e-5)
