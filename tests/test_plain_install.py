"""What a user's own `pip install .` (no extras) can do, checked from a clean virtual environment.

`make test` installs every extra, so a module that only an extra pulls in would pass every other test and still
fail a user: this file builds a venv with `pip install <repo>` and nothing else, then runs the commands the README
promises from outside the checkout (train for every algorithm, resume, plan, doctor, an experiment and its
report), and each command that needs an extra, which must be one line naming the extra, exit code 2, no
traceback. The venv reuses pip's cache (and the machine's wheels), without pip's byte-compiling of every installed
file (`--no-compile`: the interpreter compiles what it imports, as it would anyway). The programs compile into the
test session's cache: XLA's compiled programs are shared with the other tests, the program store's entries
(`rlfit.hardware.program_store`, whose digest holds the installed files) are the venv's own. The first training
runs as the user's `rlfit` command; the other commands run one after another in one process of the venv's
interpreter (`DRIVER`: the CLI's `main`, each command's output and exit code captured on its own), which saves an
interpreter start and JAX's import per command.
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


DRIVER = textwrap.dedent("""\
    import glob, json, os, sys, traceback
    from rlfit.cli import main

    commands, results = json.loads(sys.argv[1]), []
    for args in commands:
        args = [match for arg in args for match in (sorted(glob.glob(arg)) if "*" in arg else [arg])]  # as a shell
        sys.stdout.flush(); sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        with open("out.txt", "w+") as out, open("err.txt", "w+") as err:
            os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
            try:
                code = main(args)
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
            except BaseException:
                traceback.print_exc(); code = 1
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
            out.seek(0); err.seek(0)
            results.append([code, out.read(), err.read()])
    with open(sys.argv[2], "w") as file:
        json.dump(results, file)
    os._exit(0)  # as `rlfit` leaves (rlfit.cli.run): a compile thread still running must not abort the exit
    """)
"""Runs each command of argv[1] (a JSON list of argument lists, a `*` in an argument expanded as a shell would) by
`rlfit.cli.main` in this process, as the `rlfit` command would in its own, and writes [exit code, stdout, stderr]
per command to argv[2]."""

EXPERIMENT = textwrap.dedent("""\
    name: plain
    env: CartpoleBalance
    algo: ppo
    preset: smoke
    variants:
      - {name: 1-iteration, set: {run.num_timesteps: 64}}
      - {name: 2-iterations, set: {run.num_timesteps: 128}}
    seeds: 2
    suites:
      slow-control: {set: {env.overrides: {ctrl_dt: 0.02}}, episodes: 2}
    measures: [final_eval_reward]
    stages:
      full: {}
    """)
"""Two variants x two seeds, evaluated on a suite and compared in the report. The variants differ in their length
only, so both train the program that `rlfit train CartpoleBalance --preset smoke` compiled (a learning rate is
compiled into the training step: each would be another compile of it)."""


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """(run, workdir): `run(*args)` runs the plain venv's `rlfit` in `workdir`, outside the checkout; `run.python`
    is the venv's interpreter."""
    root = tmp_path_factory.mktemp("plain-install")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    # The test session's compile cache (tests/conftest.py): XLA's compiled programs of the same sizes that other
    # tests compiled are hits, but the program store's entries are this install's own (their digest holds the
    # installed rlfit's files), so each training step is still traced, exported and stored here
    env["RLFIT_CACHE_DIR"] = os.environ["RLFIT_TEST_SESSION_CACHE"]
    source = root / "rlfit"  # a copy of what the package is built from: pip builds in the tree it is given
    shutil.copytree(REPO_ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile",
                                str(source)], capture_output=True, text=True, env=env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    work = root / "work"
    work.mkdir()

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "rlfit"), *args], capture_output=True, text=True, cwd=work,
                              env=env, timeout=timeout)

    def run_all(*commands: list[str], timeout: float = 1200) -> list[subprocess.CompletedProcess]:
        """Each command of `commands` as `run` would run it, one after another in one process (`DRIVER`)."""
        (root / "driver.py").write_text(DRIVER)
        done = subprocess.run([str(venv / "bin" / "python"), str(root / "driver.py"), json.dumps(commands),
                               str(root / "results.json")], capture_output=True, text=True, cwd=work, env=env,
                              timeout=timeout)
        assert done.returncode == 0, done.stderr[-3000:]
        results = json.loads((root / "results.json").read_text())
        return [subprocess.CompletedProcess(["rlfit", *args], code, out, err)
                for args, (code, out, err) in zip(commands, results, strict=True)]

    run.python = venv / "bin" / "python"
    run.all = run_all
    return run, work


RAY_MANIFEST = str(REPO_ROOT / "examples" / "cartpole_study.yaml")
COMMANDS = {
    **{f"train-{algo}": ["train", "CartpoleBalance", "--algo", algo, "--preset", "smoke", "--run-dir", f"run-{algo}",
                         "--quiet"] for algo in ALGORITHMS if algo != "ppo"},
    "resume": ["resume", "run-ppo", "--timesteps", "192", "--quiet"],
    "plan": ["plan", "CartpoleBalance", "--preset", "smoke", "--json"],
    "doctor": ["doctor", "--json"],
    "experiment": ["experiment", "study.yaml", "--dir", "exps", "--quiet"],
    "report": ["report", "exps/*", "--quiet"],  # the experiment's folder, made by the command before
    "play": ["play", "run-ppo", "--out", "play.mp4"],
    "export": ["export", "run-ppo"],
    "wandb": ["train", "CartpoleBalance", "--preset", "smoke", "--set", "run.wandb=online", "--run-dir", "wandb-run"],
    "gymnax": ["train", "gymnax:CartPole-v1", "--preset", "smoke", "--run-dir", "gymnax-run"],
    "ray": ["experiment", RAY_MANIFEST, "--stage", "gpu-test", "--dir", "ray-exps", "--ray", "local"],
}
"""The commands the tests below check, after PPO's training: run by `plain`'s `run.all`, in this order."""


@pytest.fixture(scope="module")
def commands(plain):
    """{name: CompletedProcess} of COMMANDS and of "train-ppo" (run first, by the venv's `rlfit` command), and
    "ppo-iterations": PPO's run's iterations before the resume."""
    run, work = plain
    results = {"train-ppo": run("train", "CartpoleBalance", "--algo", "ppo", "--preset", "smoke", "--run-dir", "run-ppo",
                                "--quiet")}
    assert results["train-ppo"].returncode == 0, results["train-ppo"].stderr[-3000:]
    results["ppo-iterations"] = json.loads((work / "run-ppo" / "summary.json").read_text())["iterations"]
    (work / "study.yaml").write_text(EXPERIMENT)
    results.update(zip(COMMANDS, run.all(*COMMANDS.values()), strict=True))
    return results


def test_the_extras_are_absent_from_the_plain_install(plain):
    run, _ = plain
    # one interpreter of the venv looks for every module (an interpreter start each cost a second or more)
    probe = f"import importlib.util; print(*[m for m in {list(EXTRAS_LEFT_OUT)!r} if importlib.util.find_spec(m)])"
    found = subprocess.run([str(run.python), "-c", probe], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr[-3000:]
    assert found.stdout.split() == [], \
        f"{found.stdout.split()} installed without their extras: the checks below would prove nothing"


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_every_algorithm_trains_from_a_plain_install(plain, commands, algo):
    _, work = plain
    done = commands[f"train-{algo}"]
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((work / f"run-{algo}" / "summary.json").read_text())
    assert summary["iterations"] >= 1
    # the training step went to the program store (jax.export's serialization) and came back as a program
    assert any(p["name"].startswith("training step") for p in summary["programs"]), summary["programs"]


def test_resume_plan_and_doctor_from_a_plain_install(plain, commands):
    _, work = plain
    resumed = commands["resume"]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((work / "run-ppo" / "summary.json").read_text())["iterations"] > commands["ppo-iterations"]
    planned = commands["plan"]
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert json.loads(planned.stdout)["chosen"]["num_envs"] >= 1
    doctor = commands["doctor"]
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert json.loads(doctor.stdout)["device"]["jax_backend"] == "cpu"


def test_an_experiment_and_its_report_from_a_plain_install(plain, commands):
    _, work = plain
    done = commands["experiment"]
    assert done.returncode == 0, done.stderr[-3000:]
    (exp_dir,) = (work / "exps").iterdir()
    assert (exp_dir / "report" / "report.md").exists()
    report = commands["report"]
    assert report.returncode == 0, report.stderr[-3000:]


def _one_line_naming(result: subprocess.CompletedProcess, extra: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"rlfit[{extra}]" in lines[0], lines[0]


def test_each_command_that_needs_an_extra_says_which_in_one_line(plain, commands):
    _, work = plain
    _one_line_naming(commands["play"], "video")
    assert not (work / "play.mp4").exists()
    _one_line_naming(commands["export"], "export")
    assert not (work / "run-ppo" / "policy.onnx").exists()
    _one_line_naming(commands["wandb"], "wandb")
    assert not (work / "wandb-run").exists()
    _one_line_naming(commands["gymnax"], "gridworlds")
    assert not (work / "gymnax-run").exists()
    _one_line_naming(commands["ray"], "ray")
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
