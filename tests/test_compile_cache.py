"""The persistent compile cache: a resumed run, in a new process, finds the programs its first session compiled.

JAX names each cache entry after its program (`jit_train_iteration-<key>-cache`); a program lowered differently in
the resumed process (another key) is compiled again and written as a second entry of the same name. So the test
counts, per program, the entries the first session wrote and those the resumed session added.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import cli_environment

PROGRAMS = {
    "ppo": ("jit_train_iteration", "jit__lambda", "jit__all_fingerprints"),
    "sac": ("jit_train_step", "jit__lambda", "jit__all_fingerprints"),
}
"""The programs rlfit compiles for a run and compiles again on resume: the training step, the evaluation (a
lambda over the evaluator) and the checkpoint checksums."""


def entries(cache: Path) -> Counter:
    """How many cache entries each program has (entries are `<program>-<key>-cache`)."""
    return Counter(path.name.rsplit("-", 2)[0] for path in (cache / "jax").glob("*-cache"))


def rlfit(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rlfit", *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_resumed_process_compiles_nothing_its_first_session_compiled(tmp_path, algo):
    env = dict(cli_environment(), RLFIT_CACHE_DIR=str(tmp_path / "cache"))
    run_dir = tmp_path / "run"
    rlfit(env, "train", "CartpoleBalance", "--algo", algo, "--preset", "smoke", "--set", "run.num_timesteps=1",
          "--set", "run.eval_every=1", "--set", "run.save_interval=1", "--run-dir", str(run_dir), "--quiet")
    first = entries(tmp_path / "cache")
    for program in PROGRAMS[algo]:
        assert first[program] >= 1, f"the first session left no cache entry for {program}: {sorted(first)}"

    rlfit(env, "resume", str(run_dir), "--iterations", "2", "--quiet")
    added = entries(tmp_path / "cache") - first
    assert not {program: added[program] for program in PROGRAMS[algo] if added[program]}, (
        f"the resumed process compiled again: {dict(added)}")


def test_the_cache_directory_is_the_one_configured(tmp_path):
    """The entries counted above are the run's: RLFIT_CACHE_DIR/jax is where JAX writes them."""
    code = "from rlfit.jax_setup import configure_jax; import jax; configure_jax(); print(jax.config.jax_compilation_cache_dir)"
    env = dict(os.environ, RLFIT_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert Path(out.strip()) == tmp_path / "jax"
