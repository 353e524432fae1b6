"""Shared test set-up: the repo root on sys.path (for `tests.toy_env:make`), tiny configs, shared runs, the CLI.

Expensive things (a training run compiles for seconds) are session-scoped and shared between test files.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rlfit.cli.gc_thresholds import collect_less_often

REPO_ROOT = Path(__file__).resolve().parents[1]

# The workers trace thousands of programs, as `rlfit` processes do: Python's collector runs as rarely as it does in
# them (`rlfit.cli.gc_thresholds`). Five in-process files under `-n 3`: 0.92 of the CPU seconds and 300 MiB more
# peak memory a worker (`farm-bench -n 3 --vs`, 2026-12-07, 154.0 against 165.7 s median).
collect_less_often()

# The test session compiles into its own cache, never the user's ~/.cache/rlfit. Subprocesses inherit it, and so
# do pytest-xdist's workers: the main process loads this file first and the workers reuse its folder, so a program
# one worker compiled is a cache hit in the other (a worker making its own folder compiled the same toy and
# CartpoleBalance programs twice).
# The folder this process made is removed when the session ends (about 100 MB a `make test`); one named by
# RLFIT_TEST_SESSION_CACHE is kept (benchmarks/make_test_time.py reads its compiles afterwards).
MADE_SESSION_CACHE = not os.environ.get("RLFIT_TEST_SESSION_CACHE")
SESSION_CACHE = os.environ.get("RLFIT_TEST_SESSION_CACHE") or tempfile.mkdtemp(prefix="rlfit-test-session-cache-")
os.environ["RLFIT_TEST_SESSION_CACHE"] = os.environ["RLFIT_CACHE_DIR"] = SESSION_CACHE
# Every program is kept, however fast it compiled (rlfit keeps those over 0.5 s; JAX's own setting wins there): the
# suite starts about a hundred processes that each compiled the same small programs again (checkpoint fingerprints,
# resets, random draws). tests/checkpoints, tests/cli and test_stops.py: 0.90 of the CPU seconds (`farm-bench -n 3
# --vs`, 2026-12-07, 168 against 184 s median).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# Tests check behaviour, not speed, and most of their time is XLA compiling programs that then run for a few
# iterations: XLA's cheaper CPU code generation cut the G1 smoke run's compile from 185 s to 102 s and the
# slowest test files by 22% (measured 2026-11-23); XLA's older CPU emitters instead of its fusion emitters halve
# what is left (2026-11-28, load about 4: the compile of CartpoleBalance's PPO smoke iteration 13.5 s -> 7.3 s, of
# SAC from pixels 14.0 -> 9.0 s, the toy environment's PPO, SAC and FastTD3 iterations 3.1-3.7 -> 1.4-1.7 s;
# tests/run/test_determinism.py 47 -> 31 CPU seconds). Set before JAX starts a backend; subprocesses inherit it.
# A run's numbers may differ in the last bits from default flags; every comparison in the suite is between
# runs made under the same flags, and the Brax fixtures' tolerances hold under both.
def _jaxlib_version() -> tuple[int, ...]:
    """jaxlib's release as numbers, read without importing JAX (which would start no backend, but costs seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return tuple(int(part) for part in version("jaxlib").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return (0, 0)


# XLA aborts the process on a flag it does not know, and jaxlib 0.12 removed the fusion emitters' switch (its CPU
# backend has no older emitters to fall back to): the flag is passed only to the releases that still read it.
FAST_COMPILE_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true" + (
    " --xla_cpu_use_fusion_emitters=false" if _jaxlib_version() < (0, 12) else "")
if FAST_COMPILE_FLAGS not in os.environ.get("XLA_FLAGS", ""):  # once, though xdist's workers load this file again
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE_FLAGS}".strip()
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

pytest_plugins = ("tests.g1_smoke",)  # the G1 smoke run that the G1 test files share (`g1_smoke_run`)

TOY_ENV = "tests.toy_env:make"
"""The point-reaching environment in tests/toy_env.py: reward 1 - |position - target| per env step."""

TOY_TRAIN_OVERRIDES = (
    "env.episode_length=100", "env.action_repeat=2",
    "ppo.num_envs=32", "ppo.batch_size=32", "ppo.num_minibatches=4", "ppo.unroll_length=10",
    "ppo.num_updates_per_batch=4", "ppo.learning_rate=1e-3", "ppo.discounting=0.9", "ppo.reward_scaling=1",
    "ppo.policy_hidden=[32,32]", "ppo.value_hidden=[32,32]",
    "run.num_timesteps=80000", "run.eval_every=5", "run.num_eval_envs=64",
)
"""A toy run of 32 iterations of 32 * 4 * 10 * 2 = 2560 env steps (80000 rounded up to 81920), eval every 5."""


@pytest.fixture(scope="session")
def toy_env_name() -> str:
    return TOY_ENV


@pytest.fixture(scope="session")
def toy_train_overrides() -> tuple[str, ...]:
    return TOY_TRAIN_OVERRIDES


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory):
    """`toy_run(seed)` -> the RunResult of `rlfit.train` on the toy env with TOY_TRAIN_OVERRIDES (cached per seed)."""
    import rlfit

    results = {}

    def run(seed: int = 0, tag: str = ""):
        if (seed, tag) not in results:
            run_dir = tmp_path_factory.mktemp(f"toy-seed{seed}{tag}") / "run"
            overrides = [*TOY_TRAIN_OVERRIDES, f"run.seed={seed}"]
            results[(seed, tag)] = rlfit.train(TOY_ENV, "smoke", overrides=overrides, run_dir=run_dir, quiet=True)
        return results[(seed, tag)]

    return run


def cli_environment() -> dict[str, str]:
    """The environment a user's shell would have, plus the repo root on PYTHONPATH (for tests.toy_env)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def cli_in_process(capfd, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`rlfit args...` run by the CLI's `main` in this process, as `python -m rlfit` runs it, but without an
    interpreter start (which, with its imports and first compiles, costs seconds per command); returns the same
    CompletedProcess as a subprocess would. `capfd` (pytest's fixture) captures at the file descriptors, so
    output written below Python (XLA, absl) is in stdout/stderr too; None (for a fixture wider than a test,
    which cannot have capfd) captures what Python prints. Warnings print to stderr as a fresh interpreter's
    defaults would (pytest would otherwise collect them). For signals, concurrent processes or a process's
    limits, use a real subprocess."""
    import contextlib
    import io
    import warnings

    from rlfit.cli import main

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    out, err = io.StringIO(), io.StringIO()
    if capfd is not None:
        capfd.readouterr()
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.chdir(cwd))
        if capfd is None:
            stack.enter_context(contextlib.redirect_stdout(out))
            stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(warnings.catch_warnings())
        warnings.resetwarnings()  # a fresh interpreter's filters: these categories hidden, the rest shown once
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=category)
        warnings.showwarning = show
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors, as the interpreter would exit
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
            if not isinstance(exit_.code, int | None):
                print(exit_.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    stdout, stderr = capfd.readouterr() if capfd is not None else (out.getvalue(), err.getvalue())
    return subprocess.CompletedProcess(["rlfit", *args], code, stdout, stderr)


@pytest.fixture
def run_cli(tmp_path):
    """`run_cli(*args, cwd=tmp_path)` runs `python -m rlfit args...` as a user would; returns CompletedProcess."""

    def run(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rlfit", *args], cwd=cwd or tmp_path, env=cli_environment(),
                              capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture(scope="module")
def forked_rlfit():
    """`forked_rlfit.start([args...], cwd)` -> a real `python -m rlfit args...` process (to signal or kill), forked
    from a server that imported rlfit once for the module (`tests.forked_rlfit`), with `subprocess.Popen`'s `pid`,
    `poll`, `send_signal`, `communicate` and `returncode`."""
    from tests.forked_rlfit import ForkServer

    server = ForkServer(cli_environment())
    yield server
    server.close()


SCHEDULED_FIRST = (
    "tests/run/test_g1.py", "tests/benchmarks/test_every_quick_check.py", "tests/examples/test_colab.py",
    "tests/deploy/controller/test_controller.py", "tests/deploy/controller/test_g1_observation.py",
    "tests/hardware/test_compile_cache.py", "tests/test_plain_install.py", "tests/conformance/test_stops.py",
    "tests/parallel/test_mesh.py", "tests/study/test_experiment.py", "tests/parallel/test_distributed.py",
    "tests/conformance/test_deploy.py", "tests/planning/test_memory.py", "tests/hardware/test_warp_import.py",
    "tests/checkpoints/test_run_dir_integrity.py", "tests/planning/test_randomization_memory.py",
    "tests/conformance/test_resume.py", "tests/run/test_stop_grace.py", "tests/cli/test_plan_doctor.py",
    "tests/algos/sac/test_pixels.py", "tests/algos/sac/test_planning.py", "tests/study/test_group_runner.py",
    "tests/networks/test_encoders.py", "tests/sinks/test_wandb.py", "tests/deploy/play/test_play.py",
    "tests/cli/test_train_cli.py", "tests/deploy/export/test_onnx_encoders.py", "tests/run/test_oom_backoff.py",
    "tests/planning/test_preset.py",
)
"""The test files that take longest (a fresh clone's `make test`, summed per file by benchmarks/make_test_time.py,
2026-11-28, then reordered by the CPU seconds each file's last cut left), longest first. `make test` hands whole
files to its workers in collection order (`--dist loadfile --no-loadscope-reorder`), so these start first and the
many short files fill in behind them: the workers finish within a short file of each other (when
tests/test_plain_install.py was missing here, it ran last and alone for 97 s). (By
default pytest-xdist starts the files with the most tests first, which left a one-test file of a minute or more
running alone at the end.) A file missing from this list is only scheduled later, never skipped.

The G1 files run only where ../shared holds the robot's files (else they skip at once), as it does in CI; there
tests/run/test_g1.py is the longest file (405 s in a `make test` of 2026-12-01). Its smoke run (tests/g1_smoke.py,
once per session) compiles the G1 step that test_randomization_memory.py compiles at 8 environments, whose G1 tests
wait for the run and then find the step in the compile cache (they compiled it a second time beside the run, 120 s
of the CI run of 2026-12-06, after the run moved to the robot's observation set): that file starts once the others
above have had about the run's time, so that its worker seldom waits."""


def pytest_collection_finish(session):
    """What collecting imported (JAX, Playground, rlfit, every test module: objects that live as long as the worker)
    is left out of the garbage collector's walks from now on, so that a full collection during a test walks only
    what the tests made. Five in-process files under `-n 3`: 0.95 of the CPU seconds against the
    thresholds alone (`farm-bench -n 3 --vs`, 2026-12-07, 154.7 against 163.1 s median; the pairs 0.92-0.99)."""
    gc.freeze()


def pytest_unconfigure(config):
    """The session's compile cache goes with the session that made it (pytest-xdist's workers inherit the folder
    from the main process, which ends last)."""
    if MADE_SESSION_CACHE:
        shutil.rmtree(SESSION_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """Moves the tests of SCHEDULED_FIRST's files to the front, in its order; every file keeps its tests' order."""
    rank = {path: index for index, path in enumerate(SCHEDULED_FIRST)}

    def file_rank(item) -> int:
        path = Path(str(item.path))
        relative = path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)
        return rank.get(relative, len(rank))

    items.sort(key=file_rank)
