"""What a user's own `pip install .` (no extras) can do, checked from a clean virtual environment.

`make test` installs every extra, so a module that only an extra pulls in would pass every other test and still
fail a user: this file builds a venv holding what `pip install <repo>` installs and nothing else, then runs the
commands the README promises from outside the checkout (train for every algorithm, resume, plan, doctor, an
experiment and its report), and each command that needs an extra, which must be one line naming the extra, exit
code 2, no traceback.

What `pip install .` installs is rlfit and the closure of its core requirements: pyproject.toml's `[project]
dependencies`, then each distribution's own requirements in turn (markers evaluated for this interpreter with no
extra; a `pkg[x]` requirement adds pkg's requirements under `extra == "x"`). The test session's venv holds each of
them (it has the core and the extras), so the venv is built from it instead of unpacking the same wheels again (the
venv's set-up took 31 CPU seconds that way, 7 this way, 2026-11-28): `core_closure` follows the requirements through
the installed distributions' metadata (failing if one is missing, or at a version its requirement does not allow),
and `link_into` hard-links each one's files, as its RECORD lists them, into the new venv's site-packages (console
scripts outside it, which rlfit does not run, are left out), with the bytecode the session's imports already wrote
for them (else the venv's first imports compile it: about 6 CPU seconds). rlfit itself is pip's work, as for a user:
`pip install <a copy of the repo> --no-deps --no-compile` builds it, writes its metadata and the `rlfit` command
(the test session's pip run for the new venv's interpreter, `pip --python`, so the new venv needs no pip of its
own). Then `pip check` must find every requirement of every installed distribution met (it does not follow a
`pkg[x]` requirement's extra), and `test_the_plain_install_holds_what_a_resolver_gives_the_core` checks that uv
resolves the core's requirements to exactly the venv's distributions, at the versions installed here. (A user
installing later may get newer releases; the versions checked here are the ones every other test checks.)

The programs compile into the test session's cache: XLA's compiled programs are shared with the other tests, the
program store's entries (`rlfit.hardware.program_store`, whose digest holds the installed files) are the venv's
own. The first training runs as the user's `rlfit` command; the other commands run one after another in one
process of the venv's interpreter (`DRIVER`: the CLI's `main`, each command's output and exit code captured on its
own), which saves an interpreter start and JAX's import per command.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from rlfit.config.algorithms import ALGORITHMS
from tests.conftest import REPO_ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency reads TOML the same way
    import tomli as tomllib

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


def core_closure(pyproject: Path) -> dict[str, importlib.metadata.Distribution]:
    """{canonical name: the distribution installed in this interpreter} for every distribution that `pip install .`
    of `pyproject` (no extras) installs: its `[project] dependencies`, then each one's own requirements, as pip
    follows them (markers evaluated for this interpreter with no extra; a requirement's extras, `pkg[x]`, add the
    requirements under `extra == "x"`). Fails the calling test if one is not installed here, or not at a version
    its requirement allows."""
    requirements = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    todo = [(Requirement(line), "") for line in requirements]  # (requirement, the extra of the requiring one)
    closure: dict[str, importlib.metadata.Distribution] = {}
    followed: set[tuple[str, str]] = set()  # (name, extra) whose requirements are in `todo` already
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        try:
            dist = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{requirement} (a core dependency, or one of theirs) is not installed in {sys.prefix}")
        if not requirement.specifier.contains(dist.version, prereleases=True):
            pytest.fail(f"{requirement} (a core dependency, or one of theirs): {sys.prefix} has {dist.version}")
        closure[name] = dist
        for wanted in {""} | {canonicalize_name(e) for e in requirement.extras}:
            if (name, wanted) not in followed:
                followed.add((name, wanted))
                todo += [(Requirement(line), wanted) for line in dist.requires or []]
    return closure


def link_into(site: Path, dists: Iterable[importlib.metadata.Distribution]) -> None:
    """Hard-links (copies across file systems) each file of `dists` that lies in their site-packages, as their RECORD
    lists it (their .dist-info included), and the bytecode the interpreter already wrote for their modules, into
    `site` at the same relative path. Files a RECORD puts outside site-packages (console scripts in bin/) are
    left out: nothing in rlfit runs them."""
    for dist in dists:
        assert dist.files is not None, f"{dist.metadata['Name']} has no RECORD: its files are unknown"
        for file in dist.files:
            if file.parts[0] == "..":
                continue
            paths = [str(file)]
            if file.suffix == ".py":
                paths.append(importlib.util.cache_from_source(str(file)))
            for path in paths:
                source, target = Path(dist.locate_file(path)), site / path
                if (path.endswith(".pyc") and not source.exists()) or target.exists():
                    continue  # bytecode not written (yet); a file that two distributions list
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(source, target)
                except OSError:
                    shutil.copy2(source, target)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """(run, workdir): `run(*args)` runs the plain venv's `rlfit` in `workdir`, outside the checkout; `run.python`
    is the venv's interpreter, `run.site` its site-packages."""
    root = tmp_path_factory.mktemp("plain-install")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    # The test session's compile cache (tests/conftest.py): XLA's compiled programs of the same sizes that other
    # tests compiled are hits, but the program store's entries are this install's own (their digest holds the
    # installed rlfit's files), so each training step is still traced, exported and stored here
    env["RLFIT_CACHE_DIR"] = os.environ["RLFIT_TEST_SESSION_CACHE"]
    source = root / "rlfit"  # a copy of what the package is built from: pip builds in the tree it is given
    shutil.copytree(REPO_ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    link_into(site, core_closure(source / "pyproject.toml").values())
    pip = [sys.executable, "-m", "pip", "--python", str(python)]  # the session's pip, run by the plain venv's Python
    installed = subprocess.run([*pip, "install", "-q", "--no-compile", "--no-deps", str(source)], capture_output=True,
                               text=True, env=env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # pip's own check that every requirement of every installed distribution (rlfit's included) is met, at a version
    # it allows (a requirement's extras, such as etils[epath]'s, it does not follow: the resolver's test below does)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, env=env)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    work = root / "work"
    work.mkdir()
    # A user's own environment module beside their runs (`rlfit train toy_env:make`), found as the user's Python
    # finds it: through PYTHONPATH, which holds this folder only (no checkout, no tests package)
    shutil.copy(REPO_ROOT / "tests" / "toy_env.py", work / "toy_env.py")
    env["PYTHONPATH"] = str(work)

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

    run.python = python
    run.site = site
    run.all = run_all
    return run, work


RAY_MANIFEST = str(REPO_ROOT / "examples" / "cartpole_study.yaml")
USER_ENV = "toy_env:make"
"""tests/toy_env.py copied into the plain venv's working folder: the environment module a user writes, imported from
their PYTHONPATH. The off-policy algorithms train on it (PPO trains CartpoleBalance, Playground's MJX from the plain
install): their CartpoleBalance programs, which no other test compiles, took 26-28 CPU seconds a run on 2 cores,
the toy environment's 13-14 (2026-12-07)."""
COMMANDS = {
    **{f"train-{algo}": ["train", USER_ENV, "--algo", algo, "--preset", "smoke", "--run-dir", f"run-{algo}",
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


def test_the_plain_install_holds_what_a_resolver_gives_the_core(plain, tmp_path):
    """The venv's distributions (`core_closure`'s, linked, and rlfit) are the ones uv resolves for the core's
    requirements alone, each at the version installed here (pinned by a constraint, so that a release since this
    venv was made changes nothing): neither a distribution that pip would not install nor one missing."""
    run, _ = plain
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}
    (tmp_path / "installed.txt").write_text("".join(f"{name}=={version}\n" for name, version in installed.items()
                                                    if name != "rlfit"))
    uv = Path(sys.executable).with_name("uv")
    resolved = subprocess.run([str(uv), "pip", "compile", str(REPO_ROOT / "pyproject.toml"), "--python", sys.executable,
                               "--constraint", str(tmp_path / "installed.txt"), "--quiet", "--no-header",
                               "--no-annotate", "-o", str(tmp_path / "lock.txt")],
                              capture_output=True, text=True, timeout=600)
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    pins = dict(line.split("==") for line in (tmp_path / "lock.txt").read_text().splitlines() if "==" in line)
    assert pins, "uv resolved nothing"
    linked = {canonicalize_name(d.metadata["Name"]): d.version
              for d in importlib.metadata.distributions(path=[str(run.site)])}
    assert linked.pop("rlfit") == installed["rlfit"]
    assert {canonicalize_name(name): version for name, version in pins.items()} == linked


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
