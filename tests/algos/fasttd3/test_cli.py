"""`--algo fasttd3` driven as a user drives it: bad settings are one line, exit 2, nothing written; a run records
its algorithm, its metrics and a deterministic policy that load_policy and play read; a run resumed mid-way
(with its replay buffer) ends bit-identical to a straight one."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

import rlfit
from rlfit.cli import main

TOY = "tests.toy_env:make"


def cli(capsys, *args: str) -> tuple[int, str]:
    try:
        code = main(list(args))
    except SystemExit as exit_:  # argparse usage errors
        code = exit_.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("args", "fragment"), [
    (["--set", "fasttd3.n_step=5"], "fasttd3.n_step is a setting of algo fasttd3, but this run's algo is ppo"),
    (["--algo", "fasttd3", "--set", "fasttd3.v_min=50"], "fasttd3.v_min 50.0 must be below fasttd3.v_max 10.0"),
    (["--algo", "fasttd3", "--set", "fasttd3.max_replay_size=32"], "holds fewer than n_step + 2 = 5 policy steps"),
    (["--algo", "fasttd3", "--set", "fasttd3.std_max=0.0001"], "fasttd3.std_max 0.0001 is below fasttd3.std_min"),
    (["--algo", "fasttd3", "--set", "run.precision=fp16"], "algo: fasttd3 trains in fp32 or bf16"),
    (["--algo", "fasttd3", "--preset", "pixels"], "unknown preset 'pixels' for algo fasttd3 (it is a preset of algo sac)"),
])
def test_refusals_are_one_line_and_write_nothing(capsys, tmp_path, monkeypatch, args, fragment):
    monkeypatch.chdir(tmp_path)
    code, err = cli(capsys, "train", TOY, "--preset", "smoke", *args)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and fragment in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_fasttd3_run_records_its_algorithm_and_a_deterministic_policy(capsys, tmp_path):
    run = tmp_path / "run"
    code, err = cli(capsys, "train", TOY, "--algo", "fasttd3", "--preset", "smoke", "--num-envs", "4",
                    "--run-dir", str(run), "--quiet")
    assert code == 0, err
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["algo"] == "fasttd3" and "sac" not in config and config["fasttd3"]["num_envs"] == 4
    assert json.loads((run / "policy" / "policy.json").read_text())["algorithm"] == "fasttd3"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"][-1]
    for key in ("loss/critic", "loss/actor", "q_mean", "noise_std", "replay_size", "updates", "actor_updates", "sps"):
        assert key in train
    assert train["replay_size"] == 40 + 4 * 16  # prefill of 40 (10 policy steps of 4), then 16 policy steps
    # the last iteration's 8 policy steps of 2 critic updates each; the actor after every second one
    assert train["updates"] == 2 * 8 and train["actor_updates"] == 8
    assert 0.001 <= train["noise_std"] <= 0.4

    policy = rlfit.load_policy(run)
    obs = np.random.default_rng(0).normal(size=(16, 2)).astype(np.float32)
    first, again = np.asarray(policy(obs)), np.asarray(policy(obs))
    np.testing.assert_array_equal(first, again)
    assert first.shape == (16, 1) and np.all(np.abs(first) <= 1.0)


def test_a_resumed_run_with_its_replay_buffer_is_bit_identical(tmp_path, capfd):
    from tests.checkpoints.conftest import ToyCli

    cli_ = ToyCli(tmp_path, "fasttd3", capfd=capfd)
    settings = ("--set", "run.save_interval=3", "--set", "run.eval_every=4", "--quiet",
                "--set", "fasttd3.max_replay_size=400000")  # 50,000 rows of 8 envs; few get filled
    half, full = tmp_path / "half", tmp_path / "full"
    assert cli_.run("train", *cli_.toy, *settings, "--timesteps", "320", "--run-dir", str(half)).returncode == 0
    assert cli_.run("resume", str(half), "--timesteps", "640", "--quiet").returncode == 0
    assert cli_.run("train", *cli_.toy, *settings, "--timesteps", "640", "--run-dir", str(full)).returncode == 0
    assert cli_.summary(half)["params_digest"] == cli_.summary(full)["params_digest"]
    split_rows, straight_rows = cli_.train_rows(half), cli_.train_rows(full)
    assert [r["iteration"] for r in split_rows] == list(range(1, 11))
    for a, b in zip(split_rows, straight_rows):
        assert {k: v for k, v in a.items() if k.startswith("loss/") or k == "noise_std"} == \
            {k: v for k, v in b.items() if k.startswith("loss/") or k == "noise_std"}
    newest = sorted((full / "checkpoints").iterdir())[-1]
    meta = json.loads((newest / "meta.json").read_text())
    assert {info["rows"] for info in meta["trimmed"].values()} == {50_000}  # only the filled rows were written


def test_plan_sizes_the_replay_buffer(capsys):
    code = main(["plan", TOY, "--algo", "fasttd3", "--preset", "smoke", "--set", "fasttd3.max_replay_size=100000"])
    out = capsys.readouterr().out
    assert code == 0
    assert "max_replay_size" in out and "100,000" in out


def test_the_policy_file_records_the_deterministic_head_and_acts_like_the_actor(capsys, tmp_path):
    """policy.json names `deterministic_tanh` and stores the actor as it is (A outputs, no scale head);
    `load_policy` gives tanh(actor(normalized obs)) computed here from the saved weights with numpy."""
    import rlfit

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


def test_export_writes_an_onnx_actor_that_acts_like_load_policy(capsys, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime", reason="needs the export extra: pip install 'rlfit[export]'")
    run, out = tmp_path / "run", tmp_path / "actor.onnx"
    code, err = cli(capsys, "train", TOY, "--algo", "fasttd3", "--preset", "smoke", "--run-dir", str(run), "--quiet")
    assert code == 0, err
    code, err = cli(capsys, "export", str(run), "--format", "onnx", "--out", str(out))
    assert code == 0, err
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    obs = np.random.default_rng(1).normal(scale=2.0, size=(64, 2)).astype(np.float32)
    (actions,) = session.run(["action"], {"obs": obs})
    np.testing.assert_allclose(actions, np.asarray(rlfit.load_policy(run)(obs)), atol=1e-5)
