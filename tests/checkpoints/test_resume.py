"""Resuming: refusals change nothing, a corrupt newest checkpoint falls back, --resume, a run saved without its replay
buffer. Bit-exact resume for every algorithm is tests/conformance/test_resume.py's."""

from __future__ import annotations

import json
import shutil


SMALL = ("--set", "run.save_interval=3", "--set", "run.eval_every=4", "--quiet")


def test_resume_by_iterations_and_refusals(cli):
    run = cli.tmp_path / "run"
    assert cli.run("train", *cli.toy, *SMALL, "--timesteps", "384", "--run-dir", str(run)).returncode == 0
    before = cli.snapshot(run)

    not_larger = cli.run("resume", str(run), "--iterations", "6")
    assert not_larger.returncode == 2
    assert "already at iteration 6" in not_larger.stderr and len(not_larger.stderr.strip().splitlines()) == 1

    other_network = cli.run("resume", str(run), "--set", "ppo.policy_hidden=[64,64]")
    assert other_network.returncode == 2
    assert "ppo.policy_hidden cannot change" in other_network.stderr
    assert "Traceback" not in other_network.stderr
    assert cli.snapshot(run) == before  # a refused resume changes nothing

    missing = cli.run("resume", str(cli.tmp_path / "nowhere"), "--iterations", "9")
    assert missing.returncode == 2 and "not an rlfit run directory" in missing.stderr

    more = cli.run("resume", str(run), "--iterations", "9", "--quiet")
    assert more.returncode == 0, more.stderr
    assert cli.summary(run)["iterations"] == 9
    assert [r["iteration"] for r in cli.train_rows(run)] == list(range(1, 10))


def test_corrupt_newest_checkpoint_falls_back_to_previous(any_cli):
    cli = any_cli
    run = cli.tmp_path / "run"
    assert cli.run("train", *cli.toy, *SMALL, "--timesteps", "384", "--run-dir", str(run)).returncode == 0
    checkpoints = sorted(p for p in (run / "checkpoints").iterdir())
    assert [p.name for p in checkpoints] == ["00000000", "00000003", "00000006"]
    # Flip bytes in the newest checkpoint's arrays: it must fail its checksum, not load silently.
    newest_arrays = [p for p in (checkpoints[-1] / "state").rglob("*") if p.is_file() and p.stat().st_size > 64]
    for path in newest_arrays:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    resumed = cli.run("resume", str(run), "--iterations", "8", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    warnings = [line for line in resumed.stderr.splitlines() if "00000006" in line]
    assert len(warnings) == 1 and "previous checkpoint" in warnings[0]
    rows = cli.train_rows(run)
    assert [r["iteration"] for r in rows] == list(range(1, 9))  # rows 4..6 were redone once, not duplicated


def test_resume_with_no_valid_checkpoint_is_refused(cli):
    run = cli.tmp_path / "run"
    assert cli.run("train", *cli.toy, *SMALL, "--timesteps", "192", "--run-dir", str(run)).returncode == 0
    for checkpoint in (run / "checkpoints").iterdir():
        shutil.rmtree(checkpoint / "state")
    refused = cli.run("resume", str(run), "--iterations", "5")
    assert refused.returncode == 2
    assert "no valid checkpoint" in refused.stderr.splitlines()[-1]


def test_train_with_resume_continues_or_refuses_other_settings(cli):
    run = cli.tmp_path / "run"
    assert cli.run("train", *cli.toy, *SMALL, "--timesteps", "640", "--run-dir", str(run)).returncode == 0
    shutil.rmtree(run / "checkpoints" / f"{10:08d}")  # as if killed after iteration 9's checkpoint
    before = cli.snapshot(run)
    other_env = cli.run("train", "tests.toy_env:make", "--preset", "smoke", "--timesteps", "640", "--resume", str(run))
    assert other_env.returncode == 2
    assert "env.episode_length is 50 in the run but 100 in this command" in other_env.stderr
    assert len(other_env.stderr.strip().splitlines()) == 1
    other_total = cli.run("train", *cli.toy, *SMALL, "--timesteps", "1280", "--resume", str(run))
    assert other_total.returncode == 2  # --resume refuses every other setting, the total included
    assert "run.num_timesteps is 640 in the run but 1280" in other_total.stderr
    assert "rlfit resume RUN_DIR --timesteps N" in other_total.stderr
    assert cli.snapshot(run) == before
    same = cli.run("train", *cli.toy, *SMALL, "--timesteps", "640", "--resume", str(run))
    assert same.returncode == 0, same.stderr
    assert cli.summary(run)["iterations"] == 10
    assert [r["iteration"] for r in cli.train_rows(run)] == list(range(1, 11))


def test_sac_without_its_replay_buffer_in_checkpoints_refills_on_resume_and_says_so(tmp_path, capfd):
    from tests.checkpoints.conftest import ToyCli

    cli = ToyCli(tmp_path, "sac", capfd=capfd)
    light = (*SMALL, "--set", "sac.max_replay_size=400000", "--set", "run.checkpoint_replay=false")
    run = tmp_path / "run"
    assert cli.run("train", *cli.toy, *light, "--timesteps", "320", "--run-dir", str(run)).returncode == 0
    newest = sorted((run / "checkpoints").iterdir())[-1]
    meta = json.loads((newest / "meta.json").read_text())
    assert meta["trimmed"] and all(info["dropped"] for info in meta["trimmed"].values())
    stored = sum(p.stat().st_size for p in (newest / "state").rglob("*") if p.is_file())
    assert stored < 500_000  # no replay rows: parameters, optimizer states, environments only

    resumed = cli.run("resume", str(run), "--timesteps", "640", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert "was saved without its replay buffer (run.checkpoint_replay=false)" in resumed.stderr
    assert "not bit-identical" in resumed.stderr
    rows = cli.train_rows(run)
    assert [r["iteration"] for r in rows] == list(range(1, 11))
    # the buffer was collected again: the prefill (16) plus one iteration's 8 policy steps x 8 envs
    assert rows[5]["replay_size"] == 16 + 64 < rows[4]["replay_size"]
