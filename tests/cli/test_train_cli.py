"""`rlfit train` driven as a user drives it: bad input is one line on stderr, exit 2, nothing written.

Two checks run the real command in a subprocess (exit code, stderr, no traceback, files); the rest call
`rlfit.cli.main` in-process, which is the same code path without a JAX import per case.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlfit.cli import main

TOY = "tests.toy_env:make"
TINY = ["--preset", "smoke", "--set", "env.episode_length=20"]


def files_under(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `directory` with its bytes and mtime, to prove nothing changed."""
    return {str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def assert_one_line_error(stderr: str, *fragments: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """An empty working directory, as a user's shell would have (default run dirs land in runs/ here)."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """`rlfit args...` in-process: (exit code, stdout, stderr)."""
    try:
        code = main(list(args))
    except SystemExit as exit_:  # argparse usage errors
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- the real command


def test_unknown_environment_as_a_subprocess(run_cli, tmp_path):
    result = run_cli("train", "CartpoleBalanse", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    line = assert_one_line_error(result.stderr, "CartpoleBalanse", "CartpoleBalance")
    assert line.startswith("rlfit: error:")
    assert list(tmp_path.iterdir()) == [], "no run directory may be created for bad input"


def test_tiny_train_quiet_as_a_subprocess(run_cli, tmp_path):
    run = tmp_path / "out" / "run"
    result = run_cli("train", TOY, *TINY, "--run-dir", str(run), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == "", "--quiet prints nothing"
    for name in ("config.yaml", "metrics.jsonl", "summary.json"):
        assert (run / name).is_file() and (run / name).stat().st_size > 0, name
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert '"kind": "train"' in (run / "metrics.jsonl").read_text()


# ---------------------------------------------------------------- in-process


def test_unknown_key_suggests_the_right_key(capsys, user_dir):
    code, out, err = cli(capsys, "train", TOY, *TINY, "--set", "ppo.learnig_rate=0.1")
    assert code == 2 and out == ""
    assert_one_line_error(err, "ppo.learnig_rate", "ppo.learning_rate")
    assert list(user_dir.iterdir()) == []


def test_an_unknown_advantage_estimator_names_the_choices(capsys, user_dir):
    code, out, err = cli(capsys, "train", TOY, *TINY, "--set", "ppo.advantages=gae")
    assert code == 2 and out == ""
    assert_one_line_error(err, "ppo.advantages must be one of brax, gae_once, got 'gae'")
    assert list(user_dir.iterdir()) == []


def test_unknown_environment_in_process(capsys, user_dir):
    code, _, err = cli(capsys, "train", "CartpoleBalanse", "--preset", "smoke")
    assert code == 2
    assert_one_line_error(err, "CartpoleBalance")
    assert list(user_dir.iterdir()) == []


@pytest.mark.parametrize("name", ["no_such_module_xyz:make", "tests.toy_env:nothing_here"])
def test_unknown_factory(capsys, user_dir, name):
    code, _, err = cli(capsys, "train", name, "--preset", "smoke")
    assert code == 2
    assert_one_line_error(err, name.split(":")[0])
    assert list(user_dir.iterdir()) == []


def test_malformed_yaml(capsys, user_dir, tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("ppo:\n  num_envs: [8\n")
    code, _, err = cli(capsys, "train", TOY, *TINY, "--config", str(config))
    assert code == 2
    assert_one_line_error(err, "bad.yaml", "YAML")
    assert list(user_dir.iterdir()) == []


@pytest.mark.parametrize(("args", "fragment"), [
    (["--num-envs", "-4"], "ppo.num_envs must be a positive integer"),
    (["--num-envs", "0"], "ppo.num_envs must be a positive integer"),
    (["--timesteps", "0"], "run.num_timesteps must be a positive integer"),
    (["--set", "ppo.batch_size=-8"], "ppo.batch_size must be a positive integer"),
    (["--num-envs", "many"], "ppo.num_envs must be an integer"),
    (["--num-envs", "6"], "nearest valid"),
    (["--set", "ppo.learning_rate"], "key=value"),
])
def test_invalid_values(capsys, user_dir, args, fragment):
    code, out, err = cli(capsys, "train", TOY, *TINY, *args)
    assert code == 2 and out == ""
    assert_one_line_error(err, fragment)
    assert list(user_dir.iterdir()) == []


def test_unknown_preset(capsys, user_dir):
    code, _, err = cli(capsys, "train", TOY, "--preset", "quik")
    assert code == 2
    assert_one_line_error(err, "quik", "quick")
    assert list(user_dir.iterdir()) == []


def test_unknown_option_is_a_one_line_usage_error(capsys, user_dir):
    code, _, err = cli(capsys, "train", TOY, "--nun-envs", "8")
    assert code == 2
    assert_one_line_error(err, "--nun-envs")
    assert list(user_dir.iterdir()) == []


def test_existing_run_dir_is_refused_and_left_untouched(capsys, user_dir):
    existing = user_dir / "old-run"
    (existing / "tb").mkdir(parents=True)
    (existing / "metrics.jsonl").write_text('{"kind": "train", "iteration": 1}\n')
    (existing / "tb" / "events.out.tfevents.1").write_bytes(b"\x00\x01")
    before = files_under(existing)
    code, _, err = cli(capsys, "train", TOY, *TINY, "--run-dir", str(existing))
    assert code == 2
    assert_one_line_error(err, str(existing))
    assert files_under(existing) == before
    assert sorted(p.name for p in user_dir.iterdir()) == ["old-run"]


def test_a_file_as_run_dir_is_refused(capsys, user_dir):
    target = user_dir / "notes.txt"
    target.write_text("keep me")
    code, _, err = cli(capsys, "train", TOY, *TINY, "--run-dir", str(target))
    assert code == 2
    assert_one_line_error(err)
    assert target.read_text() == "keep me"


def test_progress_lines_when_not_quiet(capsys, user_dir):
    """Not attached to a terminal: plain lines on stderr (no control codes), ending with where the run is."""
    run = user_dir / "progress-run"
    code, out, err = cli(capsys, "train", TOY, *TINY, "--run-dir", str(run))
    assert code == 0, err
    assert "\x1b[" not in err + out
    assert "Traceback" not in err
    assert str(run) in (out + err).strip().splitlines()[-1]
    assert (run / "summary.json").is_file()


def test_default_run_dir_is_under_runs(capsys, user_dir):
    """The default run directory is relative to where the user is: ./runs/<env>-<timestamp>/."""
    code, _, err = cli(capsys, "train", TOY, *TINY, "--quiet")
    assert code == 0, err
    assert err == ""
    runs = list((user_dir / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("tests-toy_env-make-")
    assert (runs[0] / "summary.json").is_file()


def test_relative_run_dir(capsys, user_dir):
    code, _, err = cli(capsys, "train", TOY, *TINY, "--quiet", "--run-dir", "mine/run")
    assert code == 0, err
    assert (user_dir / "mine" / "run" / "summary.json").is_file()


def test_python_dash_m_and_console_script_agree(tmp_path):
    """`rlfit` (the console script next to this Python) answers like `python -m rlfit`."""
    script = Path(sys.executable).parent / "rlfit"
    if not script.exists():
        pytest.skip("console script not installed next to this interpreter")
    result = subprocess.run([str(script), "train", "--help"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=120)
    module = subprocess.run([sys.executable, "-m", "rlfit", "train", "--help"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120)
    assert result.returncode == module.returncode == 0
    assert result.stdout.replace("usage: rlfit", "") == module.stdout.replace("usage: rlfit", "")
    for flag in ("--algo", "--preset", "--config", "--set", "--num-envs", "--timesteps", "--seed", "--run-dir"):
        assert flag in result.stdout


@pytest.mark.parametrize("seed", ["99999999999999999999", "4294967296", "-1"])
def test_seeds_outside_32_bits_are_refused_before_anything_is_written(capsys, user_dir, seed):
    code, out, err = cli(capsys, "train", TOY, *TINY, "--seed", seed, "--run-dir", str(user_dir / "run"))
    assert code == 2 and out == ""
    assert_one_line_error(err, "run.seed must be an integer from 0 to 4294967295", seed)
    assert list(user_dir.iterdir()) == []


def test_huge_seed_through_the_library_is_a_user_error(user_dir):
    import rlfit
    from rlfit.errors import UserError

    with pytest.raises(UserError, match="run.seed must be an integer from 0 to 4294967295"):
        rlfit.train(TOY, "smoke", overrides=["run.seed=99999999999999999999"], run_dir=user_dir / "run")
    assert list(user_dir.iterdir()) == []


def test_largest_seed_trains_and_differs_from_seed_zero(capsys, user_dir):
    import json

    digests = []
    for seed in ("4294967295", "0"):
        run = user_dir / f"seed-{seed}"
        code, _, err = cli(capsys, "train", TOY, *TINY, "--seed", seed, "--run-dir", str(run), "--quiet")
        assert code == 0, err
        digests.append(json.loads((run / "summary.json").read_text())["params_digest"])
    assert digests[0] != digests[1]


def test_empty_config_file_is_refused(capsys, user_dir, tmp_path):
    config = tmp_path / "empty.yaml"
    config.write_text("# nothing here\n")
    code, _, err = cli(capsys, "train", TOY, *TINY, "--config", str(config))
    assert code == 2
    assert_one_line_error(err, "empty.yaml is empty")
    assert list(user_dir.iterdir()) == []


def test_keys_lists_every_activation(capsys):
    from rlfit.config.rules import ACTIVATIONS

    code, out, _ = cli(capsys, "keys")
    assert code == 0
    line = next(line for line in out.splitlines() if "ppo.activation" in line)
    for activation in ACTIVATIONS:
        assert activation in line


def test_play_refuses_a_huge_seed_first(capsys, user_dir):
    code, _, err = cli(capsys, "play", str(user_dir / "no-run"), "--seed", "99999999999999999999")
    assert code == 2
    assert_one_line_error(err, "--seed must be an integer from 0 to 4294967295")
