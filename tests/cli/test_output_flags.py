"""The output flags every command shares, driven as a user drives them: every command takes `--quiet` and then
prints nothing but errors; every command that prints a result takes `--json` and then prints one JSON object on
stdout and nothing else there (also with `--quiet`). Before, `play`, `plan`, `export`, `doctor`, `envs`, `keys`
and `convert-weights` refused `--quiet` (`unrecognized arguments`)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from safetensors.numpy import save_file

from rlfit.cli import build_parser
from rlfit.cli.reference import subcommands
from rlfit.config.schema import Config, section_types
from rlfit.run.checks import CheckResult
from tests.cli.test_experiment_cli import finished_experiment
from tests.conftest import TOY_ENV, cli_in_process
from tests.deploy.play.support import headless_gl_reason, make_policy_run
from tests.networks.test_convert import torchvision_r3d18_state_dict

EVERY_COMMAND = ("train", "resume", "experiment", "report", "play", "export", "transfer-check", "sim2sim", "doctor", "plan",
                 "envs", "keys", "convert-weights")
"""Every command `rlfit --help` lists (each prints a result: a run, a file, a table or a list)."""
TINY = ["--preset", "smoke", "--set", "env.episode_length=20"]


def flags(parser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_every_command_takes_quiet_and_json():
    commands = subcommands(build_parser())
    assert set(commands) == set(EVERY_COMMAND)
    lacking = {name: sorted({"--quiet", "--json"} - flags(parser)) for name, (_, parser) in commands.items()}
    assert {name: missing for name, missing in lacking.items() if missing} == {}


def json_only(result) -> dict:
    """The one JSON object a `--json` command printed: stdout is that object and nothing else."""
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_keys_quiet_prints_nothing_and_json_every_key(capfd, tmp_path):
    quiet = cli_in_process(capfd, "keys", "--quiet", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    keys = json_only(cli_in_process(capfd, "keys", "--json", "--quiet", cwd=tmp_path))["keys"]
    every_key = ["algo", *(f"{section}.{field.name}" for section, cls in section_types().items()
                           for field in dataclasses.fields(cls))]
    assert [row["key"] for row in keys] == every_key
    assert keys[0]["default"] == Config().algo and all(row["meaning"] for row in keys)


def test_envs_quiet_prints_nothing_and_json_lists_them(capfd, tmp_path):
    quiet = cli_in_process(capfd, "envs", "--quiet", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    listed = json_only(cli_in_process(capfd, "envs", "--json", cwd=tmp_path))
    plain = cli_in_process(capfd, "envs", cwd=tmp_path).stdout.splitlines()
    assert listed["environments"] == plain and "CartpoleBalance" in plain


def test_doctor_quiet_prints_nothing_and_json_still_prints_its_object(capfd, tmp_path):
    quiet = cli_in_process(capfd, "doctor", "--quiet", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout) == (0, "")
    assert set(json_only(cli_in_process(capfd, "doctor", "--quiet", "--json", cwd=tmp_path))) >= {"device", "jax_devices"}


def test_a_failed_doctor_check_is_exit_1_and_one_line_on_stderr_also_quiet(capfd, tmp_path, monkeypatch):
    import rlfit.run.checks

    failing = [CheckResult("matmul", True, "1.0 TFLOP/s"), CheckResult("allocate", False, "could not allocate")]
    monkeypatch.setattr(rlfit.run.checks, "run_checks", lambda device, show: [show(c) or c for c in failing])
    result = cli_in_process(capfd, "doctor", "--full", "--quiet", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.strip().splitlines() == [
        "rlfit: error: 1 check(s) failed: allocate; `rlfit doctor --full` shows each check's figure"]


def test_plan_quiet_prints_nothing_and_json_the_plan(capfd, tmp_path):
    quiet = cli_in_process(capfd, "plan", TOY_ENV, "--preset", "smoke", "--quiet", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout) == (0, ""), quiet.stderr
    planned = json_only(cli_in_process(capfd, "plan", TOY_ENV, "--preset", "smoke", "--quiet", "--json", cwd=tmp_path))
    assert planned["chosen"] is not None


def test_train_and_resume_json_print_the_run_and_its_summary_and_nothing_else(capfd, tmp_path):
    run = tmp_path / "run"
    trained = json_only(cli_in_process(capfd, "train", TOY_ENV, *TINY, "--run-dir", str(run), "--json", cwd=tmp_path))
    assert trained["run_dir"] == str(run)
    assert trained["summary"] == json.loads((run / "summary.json").read_text())
    resumed = cli_in_process(capfd, "resume", str(run), "--iterations", "2", "--json", "--quiet", cwd=tmp_path)
    assert json_only(resumed)["summary"]["iterations"] == 2 == json.loads((run / "summary.json").read_text())["iterations"]
    assert resumed.stderr == ""


def test_report_and_experiment_resume_quiet_and_json(capfd, tmp_path):
    experiment = finished_experiment(tmp_path)
    quiet = cli_in_process(capfd, "report", str(experiment), "--quiet", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout) == (0, "")
    report = json_only(cli_in_process(capfd, "report", str(experiment), "--zip", "--json", cwd=tmp_path))
    assert report == {"report": str(experiment / "report" / "report.md"), "zip": str(experiment / "toy.zip")}
    finished = json_only(cli_in_process(capfd, "experiment", "resume", str(experiment), "--json", cwd=tmp_path))
    assert finished["experiment_dir"] == str(experiment) and finished["trials_failed"] == {}


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    return make_policy_run(tmp_path_factory.mktemp("output-flags") / "run", "CartpoleBalance")


def test_export_quiet_prints_nothing_and_json_what_it_wrote(capfd, cartpole_run, tmp_path):
    pytest.importorskip("onnxruntime")
    quiet = cli_in_process(capfd, "export", str(cartpole_run), "--out", str(tmp_path / "a.onnx"), "--quiet",
                           cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout) == (0, ""), quiet.stderr
    assert (tmp_path / "a.onnx").is_file()
    exported = json_only(cli_in_process(capfd, "export", str(cartpole_run), "--out", str(tmp_path / "b.onnx"),
                                        "--json", cwd=tmp_path))
    assert exported["path"] == str(tmp_path / "b.onnx") and exported["input_shape"] == [5]
    assert exported["max_abs_diff"] <= 1e-4


def test_play_quiet_json_prints_only_what_it_played(capfd, cartpole_run, tmp_path):
    pytest.importorskip("imageio")
    if (reason := headless_gl_reason()) is not None:
        pytest.skip(reason)
    played = json_only(cli_in_process(capfd, "play", str(cartpole_run), "--out", str(tmp_path / "a.gif"),
                                      "--seconds", "0.2", "--quiet", "--json", cwd=tmp_path))  # no progress line
    assert played["out"] == str(tmp_path / "a.gif") and played["frames"] > 0 and (tmp_path / "a.gif").is_file()


def test_convert_weights_quiet_prints_nothing_and_json_what_it_wrote(capfd, tmp_path):
    source = tmp_path / "r3d18.safetensors"
    save_file(torchvision_r3d18_state_dict(), str(source))
    quiet = cli_in_process(capfd, "convert-weights", str(source), "--kind", "r3d18", "--out", str(tmp_path / "a"),
                           "--quiet", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout) == (0, ""), quiet.stderr
    converted = json_only(cli_in_process(capfd, "convert-weights", str(source), "--kind", "r3d18", "--out",
                                         str(tmp_path / "b.safetensors"), "--json", cwd=tmp_path))
    assert converted == {"path": str(tmp_path / "b.safetensors"), "kind": "r3d18"}
