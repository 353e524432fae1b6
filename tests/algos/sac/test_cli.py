"""`--algo sac` driven as a user drives it: what SAC does not offer yet, and settings of the other algorithm,
are one line and exit 2 with nothing written; a run records its algorithm everywhere it is read back."""

from __future__ import annotations

import json

import pytest
import yaml

from rlfit.cli import main

TOY = "tests.toy_env:make"


def cli(capsys, *args: str) -> tuple[int, str]:
    try:
        code = main(list(args))
    except SystemExit as exit_:  # argparse usage errors
        code = exit_.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("args", "fragment"), [
    (["--algo", "sac", "--preset", "g1"], "unknown preset 'g1' for algo sac (it is a preset of algo ppo"),
    (["--set", "sac.batch_size=5"], "sac.batch_size is a setting of algo sac, but this run's algo is ppo"),
    (["--algo", "sac", "--set", "ppo.num_envs=8"], "ppo.num_envs is a setting of algo ppo, but this run's algo is sac"),
    (["--algo", "sac", "--set", "sac.max_replay_size=8"], "sac.max_replay_size 8 holds fewer than 2 policy steps"),
    (["--set", "algo=dqn"], "unknown algo 'dqn'"),
])
def test_refusals_are_one_line_and_write_nothing(capsys, tmp_path, monkeypatch, args, fragment):
    monkeypatch.chdir(tmp_path)
    code, err = cli(capsys, "train", TOY, "--preset", "smoke", *args)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and fragment in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_sac_run_records_its_algorithm(capsys, tmp_path):
    run = tmp_path / "run"
    code, err = cli(capsys, "train", TOY, "--algo", "sac", "--preset", "smoke", "--num-envs", "4",
                    "--run-dir", str(run), "--quiet")
    assert code == 0, err
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["algo"] == "sac" and "ppo" not in config and config["sac"]["num_envs"] == 4
    assert json.loads((run / "plan.json").read_text())["sizes"]["num_envs"] == 4
    assert json.loads((run / "policy" / "policy.json").read_text())["algorithm"] == "sac"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"][-1]
    for key in ("loss/critic", "loss/actor", "loss/alpha", "alpha", "entropy", "replay_size", "updates",
                "updates_per_s", "sps"):
        assert key in train
    assert train["replay_size"] == 16 + 4 * 16  # prefill of 16, then 16 policy steps of 4 envs
