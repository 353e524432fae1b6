"""What a user's own `pip install .` (no extras) can do, checked from a clean virtual environment.

`make test` installs every extra, so a module that only an extra pulls in would pass every other test and still
fail a user: this file builds a venv with `pip install <repo>` and nothing else, then runs the commands the README
promises from outside the checkout (train for every algorithm, resume, plan, doctor, an experiment and its
report), and each command that needs an extra, which must be one line naming the extra, exit code 2, no
traceback. The venv reuses pip's cache (and the machine's wheels); the programs compile into a cache of their own,
so nothing a user would not have is read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlfit.config.algorithms import ALGORITHMS
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

EXTRAS_LEFT_OUT = {"imageio_ffmpeg": "video", "onnx": "export", "wandb": "wandb", "ray": "ray", "gymnax": "gridworlds"}
"""A module of each extra that the plain install must not have (else its check below proves nothing)."""


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """(run, workdir): `run(*args)` runs the plain venv's `rlfit` in `workdir`, outside the checkout."""
    root = tmp_path_factory.mktemp("plain-install")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["RLFIT_CACHE_DIR"] = str(root / "cache")  # a first run's cache, as a new user has
    source = root / "rlfit"  # a copy of what the package is built from: pip builds in the tree it is given
    shutil.copytree(REPO_ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(source)],
                               capture_output=True, text=True, env=env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    work = root / "work"
    work.mkdir()

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "rlfit"), *args], capture_output=True, text=True, cwd=work,
                              env=env, timeout=timeout)

    run.python = venv / "bin" / "python"
    return run, work


def test_the_extras_are_absent_from_the_plain_install(plain):
    run, _ = plain
    for module in EXTRAS_LEFT_OUT:
        found = subprocess.run([str(run.python), "-c", f"import {module}"], capture_output=True, text=True)
        assert found.returncode != 0, f"{module} is installed without its extra: the checks below would prove nothing"


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_every_algorithm_trains_from_a_plain_install(plain, algo):
    run, work = plain
    done = run("train", "CartpoleBalance", "--algo", algo, "--preset", "smoke", "--run-dir", f"run-{algo}", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((work / f"run-{algo}" / "summary.json").read_text())
    assert summary["iterations"] >= 1
    # the training step went to the program store (jax.export's serialization) and came back as a program
    assert any(p["name"].startswith("training step") for p in summary["programs"]), summary["programs"]


def test_resume_plan_and_doctor_from_a_plain_install(plain):
    run, work = plain
    if not (work / "run-ppo" / "summary.json").exists():
        assert run("train", "CartpoleBalance", "--preset", "smoke", "--run-dir", "run-ppo", "--quiet").returncode == 0
    before = json.loads((work / "run-ppo" / "summary.json").read_text())["iterations"]
    resumed = run("resume", "run-ppo", "--timesteps", "192", "--quiet")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((work / "run-ppo" / "summary.json").read_text())["iterations"] > before
    planned = run("plan", "CartpoleBalance", "--preset", "smoke", "--json")
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert json.loads(planned.stdout)["chosen"]["num_envs"] >= 1
    doctor = run("doctor", "--json")
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert json.loads(doctor.stdout)["device"]["jax_backend"] == "cpu"


def test_an_experiment_and_its_report_from_a_plain_install(plain):
    run, work = plain
    manifest = work / "study.yaml"
    manifest.write_text(textwrap.dedent("""\
        name: plain
        env: CartpoleBalance
        algo: ppo
        preset: smoke
        variants:
          - {name: lr-1e-3, set: {ppo.learning_rate: 1.0e-3}}
          - {name: lr-3e-4, set: {ppo.learning_rate: 3.0e-4}}
        seeds: 2
        suites:
          slow-control: {set: {env.overrides: {ctrl_dt: 0.02}}, episodes: 2}
        measures: [final_eval_reward]
        stages:
          full: {}
        """))
    done = run("experiment", str(manifest), "--dir", "exps", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    (exp_dir,) = (work / "exps").iterdir()
    assert (exp_dir / "report" / "report.md").exists()
    report = run("report", str(exp_dir), "--quiet")
    assert report.returncode == 0, report.stderr[-3000:]


def _one_line_naming(result: subprocess.CompletedProcess, extra: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"rlfit[{extra}]" in lines[0], lines[0]


def test_each_command_that_needs_an_extra_says_which_in_one_line(plain):
    run, work = plain
    if not (work / "run-ppo" / "summary.json").exists():
        assert run("train", "CartpoleBalance", "--preset", "smoke", "--run-dir", "run-ppo", "--quiet").returncode == 0
    _one_line_naming(run("play", "run-ppo", "--out", "play.mp4"), "video")
    assert not (work / "play.mp4").exists()
    _one_line_naming(run("export", "run-ppo"), "export")
    assert not (work / "run-ppo" / "policy.onnx").exists()
    _one_line_naming(run("train", "CartpoleBalance", "--preset", "smoke", "--set", "run.wandb=online",
                         "--run-dir", "wandb-run"), "wandb")
    assert not (work / "wandb-run").exists()
    _one_line_naming(run("train", "gymnax:CartPole-v1", "--preset", "smoke", "--run-dir", "gymnax-run"), "gridworlds")
    assert not (work / "gymnax-run").exists()
    manifest = Path(REPO_ROOT / "examples" / "cartpole_study.yaml")
    _one_line_naming(run("experiment", str(manifest), "--stage", "gpu-test", "--dir", "ray-exps", "--ray", "local"),
                     "ray")
    assert not (work / "ray-exps").exists()


@pytest.mark.parametrize("extra", ["cuda", "cuda12"])
def test_each_cuda_extra_resolves_with_the_core(extra, tmp_path):
    """The CUDA extras' jax plugins must exist for a jax the core's pins allow: resolved by uv from the index's
    metadata (pip's `--dry-run` would download several GB of CUDA wheels to find the same answer)."""
    uv = Path(sys.executable).with_name("uv")
    resolved = subprocess.run([str(uv), "pip", "compile", str(REPO_ROOT / "pyproject.toml"), "--extra", extra,
                               "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
                               "--python-platform", "x86_64-manylinux_2_28", "--quiet", "-o", str(tmp_path / "lock.txt")],
                              capture_output=True, text=True, timeout=600)
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    pins = dict(line.split("==") for line in (tmp_path / "lock.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    cuda = "cuda13" if extra == "cuda" else "cuda12"
    assert pins[f"jax-{cuda}-plugin"] == pins["jax"] == pins["jaxlib"], pins
