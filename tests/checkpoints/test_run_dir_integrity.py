"""A run directory nothing can corrupt: the checkpoint's config is the truth, one writer at a time, usable after
any kill, TensorBoard that agrees with metrics.jsonl, damaged metrics lines reported and repaired."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest
import yaml

from tests.checkpoints.conftest import TOY
from tests.conftest import cli_in_process

SMALL = ("--set", "run.save_interval=3", "--set", "run.eval_every=4", "--quiet")
LONG = ("--timesteps", "6400000", "--set", "run.save_interval=3", "--set", "run.eval_every=4", "--quiet")


def wait_for(condition, process, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    raise AssertionError("timed out")


def train_row_count(run: Path) -> int:
    metrics = run / "metrics.jsonl"
    return metrics.read_text().count('"kind": "train"') if metrics.exists() else 0


def tensorboard_scalars(run: Path) -> dict[str, dict[int, float]]:
    """Every scalar in run/tb as TensorBoard's own reader sees it: tag -> {step: value}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: {event.step: event.value for event in accumulator.Scalars(tag)}
            for tag in accumulator.Tags()["scalars"]}


def assert_tensorboard_matches_metrics(cli, run: Path) -> None:
    scalars = tensorboard_scalars(run)
    rows = cli.train_rows(run)
    assert sorted(scalars["loss/total"]) == [r["env_steps"] for r in rows]
    assert sorted(scalars["train/sps"]) == [r["env_steps"] for r in rows]
    for row in rows:
        assert scalars["loss/total"][row["env_steps"]] == pytest.approx(row["loss/total"], rel=1e-6, abs=1e-6)
    evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in evals if r["kind"] == "eval"]
    assert sorted(scalars["eval/episode_reward"]) == [r["env_steps"] for r in evals]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished PPO run of 6 iterations with SMALL's settings (checkpoints 0, 3 and 6, an evaluation at 4), trained
    once for the module in this process; each test damages a copy of it (`copy_of`)."""
    root = tmp_path_factory.mktemp("finished")
    done = cli_in_process(None, "train", *TOY, "--algo", "ppo", *SMALL, "--timesteps", "384", "--run-dir",
                          str(root / "run"), cwd=root)
    assert done.returncode == 0, done.stderr
    return root / "run"


def copy_of(finished_run: Path, cli) -> Path:
    """A copy of the module's finished run in the test's own directory."""
    return Path(shutil.copytree(finished_run, cli.tmp_path / "run"))


def test_edited_config_is_refused_naming_the_key_and_an_emptied_one_is_rebuilt(cli, finished_run):
    run = copy_of(finished_run, cli)
    original = (run / "config.yaml").read_text()
    edited = yaml.safe_load(original)
    edited["env"]["name"] = "tests.toy_env:other"
    (run / "config.yaml").write_text(yaml.safe_dump(edited))
    before = cli.snapshot(run)
    refused = cli.run("resume", str(run), "--iterations", "9")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "env.name is 'tests.toy_env:other' in config.yaml but the checkpoints were trained with " \
           "'tests.toy_env:make'" in refused.stderr
    assert cli.snapshot(run) == before

    edited = yaml.safe_load(original)
    edited["ppo"]["policy_hidden"] = [64, 64]
    (run / "config.yaml").write_text(yaml.safe_dump(edited))
    refused = cli.run("resume", str(run), "--iterations", "9")
    assert refused.returncode == 2 and "ppo.policy_hidden is [64, 64] in config.yaml" in refused.stderr
    assert "corrupt" not in refused.stderr and "arrays" not in refused.stderr  # not blamed on the checkpoints

    edited = yaml.safe_load(original)
    edited["run"]["eval_every"] = 2  # a key that may change on resume
    (run / "config.yaml").write_text(yaml.safe_dump(edited))
    assert cli.run("resume", str(run), "--iterations", "8").returncode == 0
    assert any(r["iteration"] == 8 for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
               if r["kind"] == "eval")

    (run / "config.yaml").write_text("")
    rebuilt = cli.run("resume", str(run), "--iterations", "9")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "config.yaml is empty; rebuilt from checkpoint 8's record" in rebuilt.stderr
    assert yaml.safe_load((run / "config.yaml").read_text())["env"]["name"] == "tests.toy_env:make"
    assert cli.summary(run)["iterations"] == 9


def test_kill_before_the_first_iteration_leaves_a_resumable_run(any_cli, forked_rlfit):
    cli = any_cli
    run = cli.tmp_path / "run"
    process = forked_rlfit.start(["train", *cli.toy, *LONG, "--run-dir", str(run)], cli.tmp_path)
    wait_for(lambda: (run / "checkpoints" / "00000000" / "meta.json").exists(), process)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    resumed = cli.run("resume", str(run), "--iterations", "4")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["iteration"] for r in cli.train_rows(run)] == [1, 2, 3, 4]


def test_a_run_without_any_checkpoint_gives_one_working_suggestion(cli, finished_run):
    run = copy_of(finished_run, cli)
    reference = cli.summary(run)["params_digest"]
    for name in ("checkpoints", "policy", "tb"):  # as if killed before the first checkpoint was written
        shutil.rmtree(run / name)
    for name in ("metrics.jsonl", "summary.json"):
        (run / name).unlink()

    train_again = cli.run("train", *cli.toy, "--run-dir", str(run))
    assert train_again.returncode == 2 and f"continue it with `rlfit resume {run}`" in train_again.stderr
    resumed = cli.run("resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    assert "stopped before its first checkpoint" in resumed.stderr
    assert cli.summary(run)["params_digest"] == reference  # the same run as if nothing had happened

    shutil.rmtree(run / "checkpoints")  # logged iterations but no checkpoint: nothing can continue it
    refused = cli.run("resume", str(run))
    assert refused.returncode == 2 and "start a new run in another directory" in refused.stderr
    train_again = cli.run("train", *cli.toy, "--run-dir", str(run))
    assert train_again.returncode == 2 and "choose another --run-dir (or delete it)" in train_again.stderr
    assert "rlfit resume" not in train_again.stderr


def test_a_second_writer_is_refused_and_tensorboard_agrees_with_metrics_after_kill_9_and_sigterm(cli, forked_rlfit):
    """One run, three real processes (`forked_rlfit`): the `train` refuses a second writer while it trains and is
    killed with -9, a resume killed with -9 too, and a resume stopped by SIGTERM, which releases the run for the
    next writer."""
    run = cli.tmp_path / "run"
    process = forked_rlfit.start(["train", *cli.toy, *LONG, "--run-dir", str(run)], cli.tmp_path)
    # past the first evaluation (iteration 4), so that TensorBoard's eval scalars are compared below
    wait_for(lambda: train_row_count(run) >= 5, process)
    for second in (cli.run("resume", str(run), "--iterations", "60"),
                   cli.run("train", *cli.toy, "--run-dir", str(run))):
        assert second.returncode == 2
        assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
        assert f"is in use by process {process.pid} on host {socket.gethostname()} (`rlfit train " in second.stderr
        assert "`, training it); wait for it to finish" in second.stderr
    assert process.poll() is None  # the first writer was not disturbed
    for round_ in range(2):  # kill -9 the train, then a resume
        if round_:
            target = train_row_count(run) + 5
            wait_for(lambda: train_row_count(run) >= target, process)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        rows = cli.train_rows(run)
        logged = tensorboard_scalars(run)["loss/total"]
        # flushed every row: TensorBoard holds every logged row, but perhaps the one the kill interrupted
        assert {r["env_steps"] for r in rows[:-1]} <= set(logged)
        process = forked_rlfit.start(["resume", str(run), "--quiet"], cli.tmp_path)
    target = train_row_count(run) + 1  # the resume has cut the rows back to its checkpoint and trains again
    wait_for(lambda: train_row_count(run) >= target, process)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 143, stderr
    done = cli.summary(run)["iterations"]
    assert [r["iteration"] for r in cli.train_rows(run)] == list(range(1, done + 1))
    assert_tensorboard_matches_metrics(cli, run)
    assert (run / ".rlfit.lock").read_text() == ""  # released: nobody holds it
    assert cli.run("resume", str(run), "--iterations", str(done + 2), "--quiet").returncode == 0  # the next writer
    assert [r["iteration"] for r in cli.train_rows(run)] == list(range(1, done + 3))
    assert_tensorboard_matches_metrics(cli, run)


def test_damaged_middle_line_is_reported_and_repaired_from_the_checkpoint(cli, finished_run):
    run = copy_of(finished_run, cli)  # its newest checkpoint, 6, holds a copy of every line before it
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    damaged_at = next(n for n, line in enumerate(lines, 1) if '"iteration": 4,' in line and '"train"' in line)
    lines[damaged_at - 1] = lines[damaged_at - 1][:25] + "\x00garbage\n"
    (run / "metrics.jsonl").write_text("".join(lines))
    resumed = cli.run("resume", str(run), "--iterations", "12")
    assert resumed.returncode == 0, resumed.stderr
    warnings = [line for line in resumed.stderr.splitlines() if line.startswith("rlfit: warning")]
    assert len(warnings) == 1 and f"line {damaged_at} was damaged; restored" in warnings[0]
    assert [r["iteration"] for r in cli.train_rows(run)] == list(range(1, 13))  # no gap

    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[2] = "{not json\n"
    (run / "metrics.jsonl").write_text("".join(lines))
    for copy in (run / "checkpoints").glob("*/metrics.jsonl.gz"):
        copy.unlink()
    resumed = cli.run("resume", str(run), "--iterations", "13")
    assert resumed.returncode == 0, resumed.stderr
    assert "line 3 is damaged and checkpoint 12 holds no intact copy" in resumed.stderr


def test_unwritable_run_directories_exit_2_in_one_line(cli):
    blocker = cli.tmp_path / "a-file"
    blocker.write_text("not a directory")
    for run_dir in (blocker / "run", blocker):
        result = cli.run("train", *cli.toy, "--run-dir", str(run_dir))
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert str(blocker) in result.stderr
    assert blocker.read_text() == "not a directory"


def test_read_only_file_system_is_one_line_and_exit_4(tmp_path, monkeypatch, capsys):
    """A disk that refuses the write is exit code 4 (a failed write), not 2 (bad input), like a full one."""
    import errno

    from rlfit.cli import main

    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if self.is_relative_to(tmp_path):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    code = main(["train", "tests.toy_env:make", "--preset", "smoke", "--run-dir", str(tmp_path / "run")])
    assert code == 4
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"cannot write {tmp_path / 'run'}: Read-only file system" in error
