"""`rlfit experiment` and `rlfit report` driven as a user drives them: a manifest that cannot be run whole, a
damaged or odd experiment directory, each one line on stderr, exit 2, nothing written or overwritten; --quiet;
the gpu-test stage's device checks not run again once they passed.

Experiments here are hand-made (the files `rlfit experiment` writes, every trial finished), so nothing trains:
a finished experiment resumed only evaluates what is missing (nothing) and writes its report.
"""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest
import yaml

from rlfit.run.checks import CheckResult
from rlfit.study.manifest import parse_manifest
from tests.cli.test_train_cli import assert_one_line_error, files_under
from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES, cli_in_process

TINY = [o for o in TOY_TRAIN_OVERRIDES if not o.startswith(("run.num_timesteps", "run.num_eval_envs"))] + [
    "run.num_timesteps=2560", "run.num_eval_envs=8"]
"""One iteration: where old code trained before finding a problem, it trains little."""
MANIFEST = {"name": "toy", "env": TOY_ENV, "preset": "smoke", "set": TINY,
            "variants": [{"name": "fast", "set": {"ppo.learning_rate": 1e-3}},
                         {"name": "slow", "set": {"ppo.learning_rate": 1e-4}}],
            "seeds": 2, "seeds_per_program": 1, "suites": {"slower": {"set": {"env.overrides": {"speed": 0.1}},
                                                                        "episodes": 4}}}
REWARDS = {"fast": [10.0, 12.0], "slow": [3.0, 4.0]}


def run(capfd, tmp_path, *args: str):
    return cli_in_process(capfd, *args, cwd=tmp_path)


def write_manifest(tmp_path, manifest) -> str:
    """The manifest's path as the user types it (commands here run in `tmp_path`)."""
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(manifest))
    return "study.yaml"


def finished_experiment(root, manifest=None, stage=None):
    """An experiment directory as `rlfit experiment` leaves it once every trial finished (no report yet)."""
    manifest = manifest or MANIFEST
    parsed = parse_manifest(manifest, stage)
    path = root / "toy-exp"
    path.mkdir()
    (path / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    (path / "experiment.json").write_text(json.dumps({"name": parsed.name, "stage": parsed.stage, "set": [],
                                                      "trials": [t.path for t in parsed.trials()]}))
    for trial in parsed.trials():
        run_dir = path / "trials" / trial.path
        run_dir.mkdir(parents=True)
        reward = REWARDS[trial.variant][trial.seed] if trial.variant in REWARDS else 1.0 + trial.seed
        (run_dir / "summary.json").write_text(json.dumps({"stopped_by": None, "final_eval_reward": reward}))
        (run_dir / "suites.json").write_text(json.dumps({s.name: {"episode_reward": reward / 2} for s in parsed.suites}))
        (run_dir / "config.yaml").write_text(yaml.safe_dump(
            {"ppo": {"learning_rate": parsed.variant(trial.variant).overrides["ppo.learning_rate"]}}))
        (run_dir / "metrics.jsonl").write_text(json.dumps(
            {"kind": "eval", "iteration": 1, "env_steps": 2560, "eval/episode_reward": reward}) + "\n")
    return path


@pytest.fixture(autouse=True)
def few_resamples(monkeypatch):
    from rlfit.study import report

    monkeypatch.setattr(report, "BOOTSTRAP_REPS", 50)


# ---------------------------------------------------------------- variant names (issue 28, item 1)


@pytest.mark.parametrize("values, fragments", [
    ("[0.001, 1.0e-3]", ["grid.ppo.learning_rate lists one value twice", "[0] 0.001 and [1] 0.001"]),
    ("[1.0e-4, 0.0001, 3.0e-4]", ["grid.ppo.learning_rate lists one value twice", "[0] 0.0001 and [1] 0.0001"]),
])
def test_a_grid_value_written_twice_is_refused_before_anything_runs(capfd, tmp_path, values, fragments):
    manifest = {k: v for k, v in MANIFEST.items() if k != "variants"}
    text = yaml.safe_dump(manifest) + f"grid: {{ppo.learning_rate: {values}}}\n"  # as a user types it
    (tmp_path / "study.yaml").write_text(text)
    result = run(capfd, tmp_path, "experiment", "study.yaml", "--dir", "out")
    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_line_error(result.stderr, *fragments)
    assert not (tmp_path / "out").exists()


def test_grid_values_that_print_alike_are_two_variants_counted_once_each(capfd, tmp_path):
    manifest = {k: v for k, v in MANIFEST.items() if k != "variants"}
    manifest["grid"] = {"ppo.learning_rate": [1.0000001e-3, 1.0000002e-3], "run.wandb_project": ["a/b"]}
    experiment = finished_experiment(tmp_path, manifest)
    result = run(capfd, tmp_path, "experiment", "resume", str(experiment))
    assert result.returncode == 0, result.stderr
    assert "toy: 4/4 done, 0 left" in result.stdout and "Duplicate name" not in result.stderr
    numbers = json.loads((experiment / "report" / "results.json").read_text())
    estimates = numbers["measures"]["final_eval_reward"]["estimates"]
    assert {name: e["n"] for name, e in estimates.items()} == {
        "learning_rate=0.0010000001-wandb_project=a_b~" + HASH_OF_A_B: 2,
        "learning_rate=0.0010000002-wandb_project=a_b~" + HASH_OF_A_B: 2}
    names = zipfile.ZipFile(experiment / "toy.zip").namelist()
    assert len(names) == len(set(names))
    assert sorted(p.relative_to(experiment / "trials").parts[0] for p in (experiment / "trials").iterdir()) == \
        sorted(estimates)  # one directory per variant, none nested


HASH_OF_A_B = hashlib.sha256(b'"a/b"').hexdigest()[:8]
"""The SHA-256 of the value "a/b" as JSON: a name's hash suffix is the same on every machine."""


# ---------------------------------------------------------------- the whole manifest at load (item 2)


@pytest.mark.parametrize("change, fragments", [
    ({"suites": {"denser": {"set": {"env.bogus": 1}}}},
     ["study.yaml: suites.denser.set: unknown config key 'env.bogus'"]),
    ({"seeds": [0, 4294967296]}, ["study.yaml: seeds[1] is 4294967296", "from 0 to 4294967295"]),
    ({"stages": {"gpu-test": {"seeds": 1}, "full": {"seeds": [0, 2**32 + 5]}}},  # started as gpu-test below
     ["study.yaml: stages.full.seeds[1] is 4294967301"]),
    ({"stages": {"gpu-test": {"seeds": 1}, "full": {"set": {"ppo.learning_rat": 1.0}}}},
     ["study.yaml: stages.full.set: unknown config key 'ppo.learning_rat' (did you mean ppo.learning_rate?)"]),
    ({"variants": [{"name": "a", "set": {"ppo.learning_rate": 1e-3}}, {"name": "b", "set": {"ppo.num_env": 3}}]},
     ["study.yaml: variants[1].set (variant 'b'): unknown config key 'ppo.num_env'"]),
])
def test_every_stage_variant_seed_and_suite_is_checked_before_anything_trains(capfd, tmp_path, change, fragments):
    stage = ["--stage", "gpu-test"] if "stages" in change else []
    result = run(capfd, tmp_path, "experiment", write_manifest(tmp_path, {**MANIFEST, **change}), "--dir", "out", *stage)
    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_line_error(result.stderr, *fragments)
    assert not (tmp_path / "out").exists() and result.stdout == ""


GRIDWORLD = {"name": "grid", "env": "gridworld:Empty-5x5", "preset": "smoke", "seeds": 1, "seeds_per_program": 1,
             "set": {"env.episode_length": 16, "ppo.num_envs": 8, "ppo.batch_size": 8, "ppo.num_minibatches": 2,
                     "ppo.unroll_length": 4, "run.num_timesteps": 64, "run.num_eval_envs": 4}}


@pytest.mark.parametrize("manifest, fragments", [
    ({**GRIDWORLD, "suites": {"denser": {"set": {"env.overrides": {"obstacle_densty": 0.3}}}}},
     ["study.yaml: suites.denser.set: env.overrides names 'obstacle_densty' (did you mean obstacle_density?)",
      "valid keys: size, obstacle_density"]),
    ({**GRIDWORLD, "suites": {"dense-tiles": {"set": {"env.overrides": {"distractors": 2, "distractor_density": 1.5}}}}},
     ["study.yaml: suites.dense-tiles.set: gridworld distractor_density must be a number in [0, 1], got 1.5"]),
    ({**GRIDWORLD, "suites": {"own": {"policy": "sampled"}}},
     ["study.yaml: suites.own.policy must be one of most-likely, stochastic, got 'sampled'"]),
    ({"name": "cartpole", "env": "CartpoleBalance", "preset": "quick", "set": {"env.overrides": {"ctrl_td": 0.02}}},
     ["study.yaml: set: env.overrides names 'ctrl_td' (did you mean ctrl_dt?), which CartpoleBalance does not have",
      "valid keys: action_repeat, ctrl_dt, episode_length"]),
])
def test_an_unknown_environment_setting_is_one_short_line_at_load(capfd, tmp_path, manifest, fragments):
    result = run(capfd, tmp_path, "experiment", write_manifest(tmp_path, manifest), "--dir", "out")
    assert result.returncode == 2, result.stdout + result.stderr
    line = assert_one_line_error(result.stderr, *fragments)
    assert len(line) < 300 and "Other fields" not in line  # not Playground's config dumped
    assert not (tmp_path / "out").exists()


def test_train_names_an_unknown_environment_setting_in_one_short_line(capfd, tmp_path):
    result = run(capfd, tmp_path, "train", "CartpoleBalance", "--preset", "quick", "--set", "env.overrides={ctrl_td: 1}",
                 "--run-dir", "run")
    assert result.returncode == 2
    line = assert_one_line_error(result.stderr, "env.overrides names 'ctrl_td' (did you mean ctrl_dt?)", "valid keys: ")
    assert len(line) < 250 and not (tmp_path / "run").exists()


def test_resume_of_an_experiment_whose_manifest_is_invalid_names_the_entry(capfd, tmp_path):
    experiment = finished_experiment(tmp_path)
    bad = {**MANIFEST, "suites": {**MANIFEST["suites"], "denser": {"set": {"env.bogus": 1}}}}
    (experiment / "manifest.yaml").write_text(yaml.safe_dump(bad))
    before = files_under(experiment)
    result = run(capfd, tmp_path, "experiment", "resume", str(experiment))
    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_line_error(result.stderr, "manifest.yaml: suites.denser.set: unknown config key 'env.bogus'")
    assert files_under(experiment) == before


# ---------------------------------------------------------------- damaged or odd paths (item 5)


@pytest.mark.parametrize("record, fragment", [
    ("[1, 2]", "experiment.json holds a JSON list, not an experiment's record"),
    ('{"name": "toy", "set": []}', "experiment.json has no stage"),
    ('{"stage": 3, "set": []}', "experiment.json has stage 3"),
    ('{"stage": null, "set": "run.seed=1"}', "experiment.json has set 'run.seed=1', not a list"),
    ("not json {", "experiment.json is unreadable (not JSON: "),
    (b"\xff\xfe\x00binary", "experiment.json is unreadable (not JSON: "),
])
@pytest.mark.parametrize("command", [["experiment", "resume"], ["report"]])
def test_a_damaged_experiment_record_is_one_line(capfd, tmp_path, record, fragment, command):
    experiment = finished_experiment(tmp_path)
    record_path = experiment / "experiment.json"
    record_path.write_bytes(record if isinstance(record, bytes) else record.encode())
    before = files_under(experiment)
    result = run(capfd, tmp_path, *command, str(experiment))
    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_line_error(result.stderr, fragment, "restore it")
    assert files_under(experiment) == before


def test_report_refuses_a_report_path_that_is_a_file(capfd, tmp_path):
    experiment = finished_experiment(tmp_path)
    (experiment / "report").write_text("my notes")
    before = files_under(experiment)
    result = run(capfd, tmp_path, "report", str(experiment), "--zip")
    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_line_error(result.stderr, "report is a file, not a directory", "move it aside")
    assert files_under(experiment) == before


def test_report_refuses_a_zip_path_that_is_a_directory(capfd, tmp_path):
    experiment = finished_experiment(tmp_path)
    (experiment / "toy.zip").mkdir()
    (experiment / "toy.zip" / "kept").write_text("mine")
    before = files_under(experiment)
    result = run(capfd, tmp_path, "report", str(experiment), "--zip")
    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_line_error(result.stderr, "toy.zip is a directory", "move it aside")
    assert files_under(experiment) == before and not (experiment / "report").exists()


@pytest.mark.parametrize("option, fragments", [
    (["--interval", "bootstrap"], ["unknown interval method 'bootstrap'", "choose from auto, t, bca"]),
    (["--correction", "bonferroni"], ["unknown correction 'bonferroni'", "choose from holm, bh"]),
    (["--interval", "bcaa"], ["unknown interval method 'bcaa'", "did you mean bca"]),
])
def test_report_refuses_an_unknown_interval_method_or_correction_in_one_line(capfd, tmp_path, option, fragments):
    experiment = finished_experiment(tmp_path)
    before = files_under(experiment)
    result = run(capfd, tmp_path, "report", str(experiment), *option)
    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_line_error(result.stderr, *fragments)
    assert files_under(experiment) == before


def test_report_takes_the_interval_method_and_correction_it_is_given(capfd, tmp_path):
    experiment = finished_experiment(tmp_path)
    result = run(capfd, tmp_path, "report", str(experiment), "--interval", "BCa", "--correction", "bh", "--quiet")
    assert result.returncode == 0, result.stderr
    numbers = json.loads((experiment / "report" / "results.json").read_text())
    assert (numbers["interval_method"], numbers["correction"]) == ("bca", "bh")
    assert numbers["measures"]["final_eval_reward"]["estimates"]["fast"]["method"] == "bca"
    assert "Benjamini-Hochberg" in (experiment / "report" / "report.md").read_text()


# ---------------------------------------------------------------- --quiet and the gpu-test checks (item 7)


def test_quiet_prints_nothing_but_does_the_work(capfd, tmp_path):
    experiment = finished_experiment(tmp_path)
    result = run(capfd, tmp_path, "experiment", "resume", str(experiment), "--quiet")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    report = (experiment / "report" / "report.md").read_text()
    assert "| fast | 2 |" in report and zipfile.ZipFile(experiment / "toy.zip").testzip() is None
    (experiment / "report" / "report.md").unlink()
    result = run(capfd, tmp_path, "report", str(experiment), "--quiet")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert (experiment / "report" / "report.md").is_file()
    loud = run(capfd, tmp_path, "experiment", "resume", str(experiment))  # the same without --quiet says it
    assert loud.returncode == 0 and "toy: 4/4 done, 0 left" in loud.stdout and "report: " in loud.stdout


@pytest.fixture
def fake_checks(monkeypatch):
    """Counts runs of `rlfit doctor --full`'s checks (each passes unless `outcome['pass']` is False) and lets a
    test name the device `probe_device` reports."""
    import dataclasses

    from rlfit.hardware import probe
    from rlfit.study import schedule

    real = probe.probe_device()
    state = {"runs": 0, "pass": True, "name": real.name}

    def run_checks(device, on_result=None):
        state["runs"] += 1
        results = (CheckResult("matmul", state["pass"], "fake"),)
        for result in results:
            on_result(result)
        return results

    monkeypatch.setattr(schedule, "run_checks", run_checks)
    monkeypatch.setattr(schedule, "probe_device", lambda: dataclasses.replace(real, name=state["name"]))
    return state


def test_gpu_test_checks_run_again_only_until_they_passed_on_this_device(capfd, tmp_path, fake_checks):
    staged = {**MANIFEST, "stages": {"gpu-test": {"seeds": 2}, "full": {}}}
    experiment = finished_experiment(tmp_path, staged, "gpu-test")
    fake_checks["pass"] = False
    failed = run(capfd, tmp_path, "experiment", "resume", str(experiment))
    assert failed.returncode == 2 and "device checks failed (matmul)" in failed.stderr
    assert fake_checks["runs"] == 1
    fake_checks["pass"] = True
    for _ in range(2):  # failed before: run again; passed: not again
        result = run(capfd, tmp_path, "experiment", "resume", str(experiment))
        assert result.returncode == 0, result.stderr
    assert fake_checks["runs"] == 2
    assert "checks passed on this device in this experiment (device_checks.json); not run again" in result.stdout
    record = json.loads((experiment / "device_checks.json").read_text())
    assert record["passed"] is True and record["results"] == [{"name": "matmul", "passed": True, "figure": "fake"}]
    fake_checks["name"] = "another accelerator"
    assert run(capfd, tmp_path, "experiment", "resume", str(experiment)).returncode == 0
    assert fake_checks["runs"] == 3
