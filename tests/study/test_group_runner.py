"""An experiment whose seeds train in one compiled program: every lane is an ordinary run directory (metrics,
checkpoints, policy, summary), matches its seed trained alone, resumes alone, and stops by its own rules."""

from __future__ import annotations

import json

import pytest
import yaml

from rlfit.checkpoints.format import list_steps
from rlfit.sinks.jsonl import read_rows
from tests.conftest import TOY_ENV, cli_in_process
from tests.study.test_experiment import SHORT

pytestmark = pytest.mark.slow

MANIFEST = {"name": "grouped", "env": TOY_ENV, "preset": "smoke", "set": SHORT, "seeds": 3, "seeds_per_program": 2,
            "suites": {"slower-point": {"set": {"env.overrides": {"speed": 0.1}}, "episodes": 8}}}


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """(experiment directory, stdout) of MANIFEST: seeds 0 and 1 in one program, seed 2 alone."""
    root = tmp_path_factory.mktemp("grouped")
    (root / "grouped.yaml").write_text(yaml.safe_dump(MANIFEST))
    result = cli_in_process(None, "experiment", str(root / "grouped.yaml"), "--dir", str(root / "out"), cwd=root)
    assert result.returncode == 0, result.stderr
    [experiment] = list((root / "out").iterdir())
    return experiment, result.stdout


def summary(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def test_two_seeds_share_a_program_and_each_writes_its_own_run_directory(grouped):
    experiment, stdout = grouped
    assert "in groups of 2 seeds per program (seeds_per_program: 2 (the manifest's))" in stdout
    for seed in (0, 1, 2):
        run_dir = experiment / "trials" / "base" / f"seed-{seed}"
        record = summary(run_dir)
        assert record["iterations"] == 5 and record["stopped_by"] is None
        assert ("seed_group" in record) == (seed < 2)
        train = [row["iteration"] for row in read_rows(run_dir / "metrics.jsonl") if row["kind"] == "train"]
        assert train == [1, 2, 3, 4, 5]
        assert [row["iteration"] for row in read_rows(run_dir / "metrics.jsonl") if row["kind"] == "eval"] == [5]
        assert (run_dir / "policy").is_dir() and (run_dir / "suites.json").is_file()
        assert yaml.safe_load((run_dir / "config.yaml").read_text())["run"]["seed"] == seed
    assert summary(experiment / "trials" / "base" / "seed-0")["seed_group"]["seeds"] == [0, 1]
    assert len({summary(experiment / "trials" / "base" / f"seed-{s}")["params_digest"] for s in (0, 1, 2)}) == 3
    assert (experiment / "report" / "report.md").is_file()


def test_a_lane_matches_its_seed_trained_alone(grouped, capfd, tmp_path):
    """Over 5 updates the vmapped lane follows the same arithmetic as the solo run (rounding apart)."""
    experiment, _ = grouped
    lane = summary(experiment / "trials" / "base" / "seed-1")
    overrides = [*SHORT, "run.seed=1"]
    result = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", *[a for o in overrides for a in ("--set", o)],
                            "--run-dir", str(tmp_path / "alone"), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    alone = summary(tmp_path / "alone")
    assert lane["final_eval_reward"] == pytest.approx(alone["final_eval_reward"], rel=1e-4)
    lane_rows = [r for r in read_rows(experiment / "trials" / "base" / "seed-1" / "metrics.jsonl") if r["kind"] == "train"]
    alone_rows = [r for r in read_rows(tmp_path / "alone" / "metrics.jsonl") if r["kind"] == "train"]
    for ours, theirs in zip(lane_rows, alone_rows, strict=True):
        assert ours["episodes"] == theirs["episodes"]
        assert ours["episode/return"] == pytest.approx(theirs["episode/return"], rel=1e-4)


def test_a_lane_resumes_alone(grouped, capfd):
    experiment, _ = grouped
    run_dir = experiment / "trials" / "base" / "seed-0"
    result = cli_in_process(capfd, "resume", str(run_dir), "--iterations", "7", "--quiet", cwd=experiment)
    assert result.returncode == 0, result.stderr
    assert summary(run_dir)["iterations"] == 7
    train = [row["iteration"] for row in read_rows(run_dir / "metrics.jsonl") if row["kind"] == "train"]
    assert train == [1, 2, 3, 4, 5, 6, 7]


def test_each_lane_stops_by_its_rules_with_a_checkpoint(capfd, tmp_path):
    (tmp_path / "stop.yaml").write_text(yaml.safe_dump({
        **MANIFEST, "seeds": 2, "suites": {}, "set": [*SHORT, "run.eval_every=1", "run.target_reward=-1000"]}))
    result = cli_in_process(capfd, "experiment", str(tmp_path / "stop.yaml"), "--dir", str(tmp_path / "out"),
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [experiment] = list((tmp_path / "out").iterdir())
    for seed in (0, 1):
        run_dir = experiment / "trials" / "base" / f"seed-{seed}"
        record = summary(run_dir)
        assert record["stopped_by"] == "target_reward" and record["iterations"] == 1
        assert record["seed_group"]["seeds"] == [0, 1]
        assert list_steps(run_dir / "checkpoints")[-1] == 1


def test_a_killed_group_resumes_together_bit_identically(capfd, tmp_path):
    """SIGKILL while the lanes train (maybe between two lanes' saves), then `experiment resume`: every lane
    ends with the parameters of the same group never stopped. That group saves only at its start and end
    (`run.save_interval=1000`, not 2: 4 saves, not 26; a save is a few tenths of a CPU second per lane), which
    changes nothing it trains; the killed group's every-2-iterations saves are what the kill must land between."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import cli_environment

    long = [o for o in SHORT if not o.startswith("run.num_timesteps")] + ["run.num_timesteps=61440",
                                                                          "run.save_interval=2"]  # 24 iterations
    manifest = {**MANIFEST, "seeds": 2, "suites": {}, "set": long}
    (tmp_path / "kill.yaml").write_text(yaml.safe_dump(manifest))
    process = subprocess.Popen([sys.executable, "-m", "rlfit", "experiment", str(tmp_path / "kill.yaml"), "--dir",
                                str(tmp_path / "killed")], env=cli_environment(), cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        steps = list_steps(next(iter((tmp_path / "killed").glob("*/trials/base/seed-1/checkpoints")), tmp_path / "x"))
        if steps and steps[-1] >= 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    [killed] = list((tmp_path / "killed").iterdir())
    assert not (killed / "trials" / "base" / "seed-0" / "summary.json").exists(), "finished before the kill"
    resumed = cli_in_process(capfd, "experiment", "resume", str(killed), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "in one program (resumed)" in resumed.stdout
    (tmp_path / "straight.yaml").write_text(yaml.safe_dump({**manifest, "set": [*long[:-1], "run.save_interval=1000"]}))
    straight = cli_in_process(capfd, "experiment", str(tmp_path / "straight.yaml"), "--dir",
                              str(tmp_path / "straight"), cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr
    [uninterrupted] = list((tmp_path / "straight").iterdir())
    for seed in (0, 1):
        ours = summary(killed / "trials" / "base" / f"seed-{seed}")
        theirs = summary(uninterrupted / "trials" / "base" / f"seed-{seed}")
        assert ours["iterations"] == theirs["iterations"] == 24
        assert ours["params_digest"] == theirs["params_digest"]
        assert ours["final_eval_reward"] == theirs["final_eval_reward"]
        rows = [r["iteration"] for r in read_rows(killed / "trials" / "base" / f"seed-{seed}" / "metrics.jsonl")
                if r["kind"] == "train"]
        assert rows == list(range(1, 25))


def test_a_lane_s_summary_and_plan_are_the_records_they_are_written_from(grouped):
    """A lane's summary.json has a solo run's fields and `seed_group` (no `stop_grace`); its plan.json's `extra` holds
    the group's record: each reads into its record and out again unchanged."""
    import dataclasses

    from rlfit.planning.plan import PlanExtra
    from rlfit.run.summary_record import LaneSummary

    lane_dir = grouped[0] / "trials" / "base" / "seed-1"  # seed-0 is resumed alone by another test
    written = summary(lane_dir)
    assert list(written) == [field.name for field in dataclasses.fields(LaneSummary)]
    assert LaneSummary.from_json(written).to_json() == written
    extra = json.loads((lane_dir / "plan.json").read_text())["extra"]
    assert PlanExtra.from_json(extra).to_json() == extra and extra["seed_group"]["seeds"] == [0, 1]
