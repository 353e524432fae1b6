"""An experiment end to end on the toy environment: killed with SIGKILL after its first trial, resumed, it
finishes without training a finished trial again; a seed trained after another in one process equals the same
seed trained alone; the report's numbers are the trials' own."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest
import yaml

from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES, cli_environment, cli_in_process

pytestmark = pytest.mark.slow

SHORT = [o for o in TOY_TRAIN_OVERRIDES if not o.startswith("run.num_timesteps")] + ["run.num_timesteps=12800"]
"""5 iterations of 2560 env steps, evaluated at 5."""
MANIFEST = {
    "name": "toy",
    "env": TOY_ENV,
    "preset": "smoke",
    "set": SHORT,
    "variants": [{"name": "fast", "set": {"ppo.learning_rate": 1e-3}},
                 {"name": "slow", "set": {"ppo.learning_rate": 1e-4}}],
    "seeds": 2,
    "seeds_per_program": 1,  # one after another (tests/study/test_group_runner.py trains seeds in one program)
    "suites": {"slower-point": {"set": {"env.overrides": {"speed": 0.1}}, "episodes": 8}},
    "correlations": [{"x": "ppo.learning_rate", "y": "final_eval_reward"}],
}


@pytest.fixture(scope="module")
def killed_then_resumed(tmp_path_factory):
    """(experiment dir, the first trial's files before the resume) of an experiment killed after one trial."""
    root = tmp_path_factory.mktemp("experiment")
    manifest = root / "toy.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST))
    process = subprocess.Popen([sys.executable, "-m", "rlfit", "experiment", str(manifest), "--dir", str(root / "out")],
                               env=cli_environment(), cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 240
    first = None
    while time.monotonic() < deadline and process.poll() is None:
        found = list((root / "out").glob("*/trials/fast/seed-0/suites.json"))
        if found:
            first = found[0].parent
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert first is not None, "the first trial did not finish in time"
    before = {name: (first / name).read_bytes() for name in ("summary.json", "metrics.jsonl", "suites.json")}
    experiment = first.parents[2]
    result = cli_in_process(None, "experiment", "resume", str(experiment), cwd=root)  # killed: a process; resumed: here
    assert result.returncode == 0, result.stderr
    return experiment, before, result.stdout


def test_resume_finishes_without_retraining_a_finished_trial(killed_then_resumed):
    experiment, before, stdout = killed_then_resumed
    first = experiment / "trials" / "fast" / "seed-0"
    assert {name: (first / name).read_bytes() for name in before} == before
    assert "running fast seed 0" not in stdout
    for variant in ("fast", "slow"):
        for seed in (0, 1):
            summary = json.loads((experiment / "trials" / variant / f"seed-{seed}" / "summary.json").read_text())
            assert summary["stopped_by"] is None and summary["iterations"] == 5


def test_the_report_holds_the_trials_numbers(killed_then_resumed):
    experiment, _, _ = killed_then_resumed
    results = json.loads((experiment / "report" / "results.json").read_text())
    rewards = {v: [json.loads((experiment / "trials" / v / f"seed-{s}" / "summary.json").read_text())
                   ["final_eval_reward"] for s in (0, 1)] for v in ("fast", "slow")}
    final = results["measures"]["final_eval_reward"]
    for variant, values in rewards.items():
        assert final["values"][variant] == values
        assert final["estimates"][variant]["mean"] == pytest.approx(np.mean(values))
        assert final["estimates"][variant]["n"] == 2
    profile = final["profile"]
    for variant, values in rewards.items():
        assert profile[variant]["fraction"] == pytest.approx([np.mean(np.array(values) > t) for t in profile["taus"]])
    [comparison] = final["comparisons"]
    assert comparison["mean_diff"] == pytest.approx(np.mean(rewards["fast"]) - np.mean(rewards["slow"]))
    assert comparison["p_adjusted"] >= comparison["welch_p"]  # Holm over the report's family of tests
    assert f"adjusted p = {comparison['p_adjusted']:.2g}" in comparison["verdict"]
    suites = {v: [json.loads((experiment / "trials" / v / f"seed-{s}" / "suites.json").read_text())
                  ["slower-point"]["episode_reward"] for s in (0, 1)] for v in ("fast", "slow")}
    assert results["measures"]["suite/slower-point"]["values"] == suites
    [corr] = results["correlations"]
    assert corr["n"] == 4 and corr["pearson_r"] == pytest.approx(
        np.corrcoef([1e-3, 1e-3, 1e-4, 1e-4], rewards["fast"] + rewards["slow"])[0, 1])
    report = (experiment / "report" / "report.md").read_text()
    for figure in ("learning_curves.png", "final_eval_reward.png", "final_eval_reward-profile.png", "suites.png",
                   "correlation-0.png"):
        assert f"]({figure})" in report and (experiment / "report" / figure).read_bytes()[:4] == b"\x89PNG"
    with zipfile.ZipFile(experiment / "toy.zip") as archive:
        names = set(archive.namelist())
    assert f"{experiment.name}/report/report.md" in names and f"{experiment.name}/manifest.yaml" in names
    assert f"{experiment.name}/trials/slow/seed-1/summary.json" in names
    assert not any("/checkpoints/" in name for name in names)


def test_a_seed_trained_after_another_equals_the_seed_trained_alone(killed_then_resumed, capfd, tmp_path):
    """seed-1 of each variant ran after seed-0 in the same process (reusing its compiled programs)."""
    experiment, _, _ = killed_then_resumed
    trial = json.loads((experiment / "trials" / "slow" / "seed-1" / "summary.json").read_text())
    overrides = [*SHORT, "ppo.learning_rate=0.0001", "run.seed=1"]
    result = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", *[a for o in overrides for a in ("--set", o)],
                            "--run-dir", str(tmp_path / "alone"), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    alone = json.loads((tmp_path / "alone" / "summary.json").read_text())
    assert alone["params_digest"] == trial["params_digest"]
    assert trial["compile_reused"] and not alone["compile_reused"]


def test_ray_gives_the_same_trials_as_without_it(killed_then_resumed, tmp_path, capfd, monkeypatch):
    """The same manifest's seed 1 of both variants, as Ray tasks on a local Ray instance started by `rlfit experiment
    --ray local`: the CLI's main in this process (the driver only waits and writes the report; Ray's workers, which
    train, are processes of their own), Ray shut down and the signal handlers it installs put back afterwards. The
    instance has one CPU (`RAY_OVERRIDE_RESOURCES`), so the two tasks run one after the other in one worker process,
    which starts JAX once."""
    ray = pytest.importorskip("ray")
    experiment, _, _ = killed_then_resumed
    manifest = tmp_path / "toy.yaml"
    manifest.write_text(yaml.safe_dump({**MANIFEST, "seeds": [1]}))
    monkeypatch.setenv("PYTHONPATH", cli_environment()["PYTHONPATH"])  # the workers import tests.toy_env
    monkeypatch.setenv("RAY_OVERRIDE_RESOURCES", json.dumps({"CPU": 1}))
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = cli_in_process(capfd, "experiment", str(manifest), "--dir", str(tmp_path / "out"), "--ray", "local",
                                cwd=tmp_path)
    finally:
        ray.shutdown()
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ray: 2 tasks" in result.stdout
    [on_ray] = list((tmp_path / "out").iterdir())
    for variant in ("fast", "slow"):
        ray_summary = json.loads((on_ray / "trials" / variant / "seed-1" / "summary.json").read_text())
        here = json.loads((experiment / "trials" / variant / "seed-1" / "summary.json").read_text())
        assert ray_summary["params_digest"] == here["params_digest"]
        assert ray_summary["final_eval_reward"] == here["final_eval_reward"]
    assert (on_ray / "report" / "report.md").is_file() and (on_ray / "toy.zip").is_file()


def test_a_diverging_trial_is_recorded_and_the_study_goes_on(capfd, tmp_path):
    manifest = tmp_path / "toy.yaml"
    manifest.write_text(yaml.safe_dump({
        **{k: v for k, v in MANIFEST.items() if k not in ("suites", "correlations")}, "seeds": 1,
        "variants": [{"name": "fine"}, {"name": "nan", "set": {"env.overrides": {"nan_after_steps": 3}}}]}))
    result = cli_in_process(capfd, "experiment", str(manifest), "--dir", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 6, result.stderr  # its own code: 3 is a single run that became non-finite
    assert result.stderr.strip().splitlines()[-1] == (
        "rlfit: 1 trial(s) failed and are left out of the statistics: nan/seed-0")
    [experiment] = list((tmp_path / "out").iterdir())
    failed = json.loads((experiment / "trials" / "nan" / "seed-0" / "failed.json").read_text())
    assert failed["kind"] == "NonFiniteError" and "non-finite" in failed["error"]
    results = json.loads((experiment / "report" / "results.json").read_text())
    assert list(results["trials_failed"]) == ["nan/seed-0"]
    assert list(results["measures"]["final_eval_reward"]["values"]) == ["fine"]
    assert "trial `nan/seed-0` failed (left out of the statistics)" in (experiment / "report" / "report.md").read_text()
    again = cli_in_process(capfd, "experiment", "resume", str(experiment), cwd=tmp_path)  # reported, not retried
    assert again.returncode == 6 and "running" not in again.stdout
