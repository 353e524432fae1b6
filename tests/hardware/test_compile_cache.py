"""The persistent compile cache: a resumed run, in a new process, finds the programs its first session compiled
(and rlfit's program store the traced programs, so that it does not trace them again).

JAX names each cache entry after its program (`jit_train_iteration-<key>-cache`); a program lowered differently in
the resumed process (another key) is compiled again and written as a second entry of the same name. So the test
counts, per program, the entries the first session wrote and those the resumed session added.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import cli_environment, cli_in_process

PROGRAMS = {
    "ppo": ("jit_train_iteration", "jit__lambda", "jit__all_fingerprints"),
    "sac": ("jit_train_step", "jit__lambda", "jit__all_fingerprints"),
}
"""The programs rlfit compiles for a run and compiles again on resume: the training step, the evaluation (a
lambda over the evaluator; so is the starting state's program, which a resumed run does not need) and the
checkpoint checksums."""


def entries(cache: Path) -> Counter:
    """How many cache entries each program has (entries are `<program>-<key>-cache`)."""
    return Counter(path.name.rsplit("-", 2)[0] for path in (cache / "jax").glob("*-cache"))


def rlfit(env: dict[str, str], *args: str) -> tuple[str, float]:
    """Runs `rlfit ARGS`; returns what it printed and its wall-clock seconds as this test measured them."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rlfit", *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr, time.perf_counter() - started


ENVS = {"ppo": "PendulumSwingup", "sac": "gymnax:Pendulum-v1"}
"""PPO on an MJX environment (Playground's simplest model, one hinge: its three programs compile in about half
CartpoleBalance's time, and each is compiled twice here, cold, by design); SAC on a pure-JAX one (a built-in
family, whose programs are stored too), which compiles in a fraction of the time: what is checked (placements,
program keys, the store) does not depend on the physics."""


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_resumed_process_compiles_nothing_its_first_session_compiled(tmp_path, monkeypatch, algo):
    # Every program is written to the cache, however fast it compiles (rlfit's threshold of 0.5 s would leave out
    # the checksums' program on a quiet machine, and make the test depend on the machine's speed).
    env = dict(cli_environment(), RLFIT_CACHE_DIR=str(tmp_path / "cache"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    run_dir = tmp_path / "run"
    rlfit(env, "train", ENVS[algo], "--algo", algo, "--preset", "smoke", "--set", "run.num_timesteps=1",
          "--set", "run.eval_every=1", "--set", "run.save_interval=1", "--run-dir", str(run_dir), "--quiet")
    first = entries(tmp_path / "cache")
    for program in PROGRAMS[algo]:
        assert first[program] >= 1, f"the first session left no cache entry for {program}: {sorted(first)}"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [(p["name"], p["from_cache"]) for p in summary["programs"]] == [
        ("training step", False), ("evaluation", False), ("starting state", False)]

    printed, wall_s = rlfit(env, "resume", str(run_dir), "--iterations", "2")
    added = entries(tmp_path / "cache") - first
    assert not {program: added[program] for program in PROGRAMS[algo] if added[program]}, (
        f"the resumed process compiled again: {dict(added)}")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [(p["name"], p["from_cache"]) for p in summary["programs"]] == [("training step", True),
                                                                          ("evaluation", True)]
    # ... and neither traced nor lowered them again: both came from rlfit's program store
    assert [(p["name"], p["from_store"]) for p in summary["programs"]] == [("training step", True),
                                                                          ("evaluation", True)]
    resumed_digest = summary["params_digest"]
    assert sum(p["compile_s"] for p in summary["programs"]) <= summary["compile_s"] + 1e-6
    # From the process's start to its first step: after the compiles, before the process ended.
    assert summary["compile_s"] < summary["time_to_first_step_s"] < wall_s
    # A resumed run restores its state: two programs, not the starting state's.
    assert "compiling 1 of 2: training step" in printed and "compiling 2 of 2: evaluation" in printed
    assert "starting state" not in printed
    assert "compiled 1 of 2: training step in" in printed
    assert "(from the program store and the compile cache)" in printed

    # The stored programs compute what the traced code computes: the same two iterations, uninterrupted, with the
    # store switched off, end with the same parameters. (In this process: the reference needs no fresh process or
    # cold cache, only the code traced anew, which the switch ensures.)
    plain = tmp_path / "plain"
    monkeypatch.setenv("RLFIT_PROGRAM_STORE", "0")
    done = cli_in_process(None, "train", ENVS[algo], "--algo", algo, "--preset", "smoke",
                          "--set", f"run.num_timesteps={summary['env_steps']}", "--set", "run.eval_every=1",
                          "--run-dir", str(plain), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    plain_summary = json.loads((plain / "summary.json").read_text())
    assert plain_summary["env_steps"] == summary["env_steps"]
    assert not any(p["from_store"] for p in plain_summary["programs"])
    assert plain_summary["params_digest"] == resumed_digest


def test_the_cache_directory_is_the_one_configured(tmp_path):
    """The entries counted above are the run's: RLFIT_CACHE_DIR/jax is where JAX writes them."""
    code = ("from rlfit.hardware.jax_setup import configure_jax; import jax; configure_jax(); "
            "print(jax.config.jax_compilation_cache_dir)")
    env = dict(os.environ, RLFIT_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert Path(out.strip()) == tmp_path / "jax"


def test_timed_compile_reads_the_programs_own_lookup(tmp_path):
    """In a fresh cache, a program compiled once is a miss and compiled again (another process) a hit; a small
    program run eagerly inside the block first (its own lookup, a miss) does not decide the record."""
    code = (
        "import jax, jax.numpy as jnp\n"
        "jax.config.update('jax_compilation_cache_dir', {cache!r})\n"
        "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)\n"
        "jax.config.update('jax_persistent_cache_min_entry_size_bytes', 0)\n"
        "from rlfit.hardware.compile_log import timed_compile\n"
        "with timed_compile('step') as timing:\n"
        "    jnp.arange({n}) * 3  # eager: a program of its own, looked up first\n"
        "    jax.jit(lambda x: jnp.sin(x) @ x.T).lower(jnp.ones((8, 8))).compile()\n"
        "print(timing.record.from_cache, timing.record.compile_s > 0)\n")
    run = lambda n: subprocess.run([sys.executable, "-c", code.format(cache=str(tmp_path), n=n)],  # noqa: E731
                                   capture_output=True, text=True, check=True).stdout.split()
    assert run(5) == ["False", "True"]
    assert run(7) == ["True", "True"]  # the eager program differs (a miss), the compiled one is found


CACHE_NOTE = "rlfit: note: no compile cache"


def train_toy(cache_dir, tmp_path):
    """`rlfit train` on the toy environment with RLFIT_CACHE_DIR=cache_dir; (exit code, stderr)."""
    from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES, cli_environment

    sets = [arg for key in TOY_TRAIN_OVERRIDES if not key.startswith("run.num_timesteps") for arg in ("--set", key)]
    done = subprocess.run([sys.executable, "-m", "rlfit", "train", TOY_ENV, *sets, "--set", "run.num_timesteps=2560",
                           "--run-dir", str(tmp_path / "run"), "--quiet"],
                          env={**cli_environment(), "RLFIT_CACHE_DIR": str(cache_dir)}, capture_output=True, text=True)
    return done.returncode, done.stderr


@pytest.mark.parametrize("kind", ["a file", "inside a file"])
def test_a_cache_folder_that_cannot_be_created_is_one_note_and_training_goes_on(tmp_path, kind):
    (tmp_path / "file").write_text("not a folder")
    cache = tmp_path / "file" if kind == "a file" else tmp_path / "file" / "below"
    code, err = train_toy(cache, tmp_path)
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith(CACHE_NOTE)]
    assert len(notes) == 1 and str(cache / "jax") in notes[0], err
    assert notes[0].endswith("a file stands where a folder should be: move it, or set RLFIT_CACHE_DIR to another "
                             "folder"), notes[0]
    assert (tmp_path / "run" / "summary.json").exists()
    assert (tmp_path / "file").read_text() == "not a folder"


WRITE_FAILURES = (
    "import warnings, jax, jax.numpy as jnp\n"
    "from rlfit.hardware.jax_setup import configure_jax\n"
    "configure_jax()\n"
    "from jax._src import compilation_cache as cc\n"
    "before = cc.is_cache_used(jax.devices()[0].client)\n"
    "for name in ('a', 'b', 'c'):\n"
    "    warnings.warn(f\"Error writing persistent compilation cache entry for '{{name}}': {cause}\")\n"
    "warnings.warn('another warning')\n"
    "print(before, cc.is_cache_used(jax.devices()[0].client))\n")
"""Gives JAX's warning for three entries it failed to write (`cause`); prints whether the cache was in use before
and after."""


@pytest.mark.parametrize("cause, problem, advice", [
    ("OSError: [Errno 28] No space left on device", "No space left on device",
     "free space there, or set RLFIT_CACHE_DIR to a folder with free space"),
    ("PermissionError: [Errno 13] Permission denied: '/somewhere'", "Permission denied",
     "make the folder writable, or set RLFIT_CACHE_DIR to a writable folder"),
])
def test_a_folder_that_cannot_be_written_is_one_note_naming_its_cause_and_turns_the_cache_off(tmp_path, cause,
                                                                                               problem, advice):
    """JAX warns once per entry it cannot write; rlfit says it once, with the advice for that cause, and stops
    writing (no further lookups)."""
    done = subprocess.run([sys.executable, "-c", WRITE_FAILURES.format(cause=cause)],
                          env={**os.environ, "RLFIT_CACHE_DIR": str(tmp_path)}, capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["True", "False"]
    notes = [line for line in done.stderr.splitlines() if line.startswith(CACHE_NOTE)]
    assert notes == [f"{CACHE_NOTE} ({tmp_path / 'jax'}: {problem}); compiling without it. To keep compiled programs "
                     f"between runs, {advice}"]
    assert "Error writing persistent" not in done.stderr and "another warning" in done.stderr


def test_an_entry_that_cannot_be_serialized_is_named_and_the_cache_stays_on(tmp_path):
    """A failure that is not the folder's (XLA cannot serialize one program) says so for that program only."""
    cause = "JaxRuntimeError: UNIMPLEMENTED: this executable cannot be serialized"
    done = subprocess.run([sys.executable, "-c", WRITE_FAILURES.format(cause=cause)],
                          env={**os.environ, "RLFIT_CACHE_DIR": str(tmp_path)}, capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["True", "True"]
    assert CACHE_NOTE not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("rlfit: note:")] == [
        f"rlfit: note: could not write the compile cache entry of {name} ({cause}); the next run compiles it again"
        for name in "abc"]


@pytest.mark.skipif(os.geteuid() != 0 or sys.platform != "linux", reason="mounting a tmpfs needs root on Linux")
@pytest.mark.parametrize("options", ["size=64k", "ro"])
def test_a_full_or_read_only_cache_folder_is_one_note_and_training_goes_on(tmp_path, options):
    mount = tmp_path / "cache"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        if options.startswith("size"):
            (mount / "jax").mkdir()
            with open(mount / "fill", "wb", buffering=0) as fill:  # fill the file system; the folder stays
                try:
                    while True:
                        fill.write(b"\0" * 4096)
                except OSError:
                    pass
        code, err = train_toy(mount, tmp_path)
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    assert code == 0, err
    assert len([line for line in err.splitlines() if line.startswith(CACHE_NOTE)]) == 1, err
    assert "Error writing persistent" not in err and "Traceback" not in err, err
    assert (tmp_path / "run" / "summary.json").exists()


LOOKUPS = """
import json, jax, jax.numpy as jnp
from jax._src import compilation_cache
from rlfit.hardware.compile_log import timed_compile
from rlfit.hardware.jax_setup import configure_jax
configure_jax()
def garbled(x): return jnp.sin(x) @ x.T
def cut_short(x): return jnp.cos(x) @ x.T
def unloadable(x): return jnp.tanh(x) @ x.T
def whole(x): return jnp.exp(x) @ x.T
found = {}
for program in (garbled, cut_short, unloadable, whole):
    with timed_compile(program.__name__) as timing:
        jax.jit(program).lower(jnp.ones((8, 8))).compile()
    found[program.__name__] = timing.record.from_cache
print(json.dumps({"from_cache": found, "cache_used": compilation_cache.is_cache_used(jax.devices()[0].client)}))
"""
"""Compiles four small programs, each with a compile-cache entry of its own; prints which came from the cache and
whether the cache is still in use."""


def test_a_damaged_compile_cache_entry_is_a_miss_for_its_program_only_and_is_written_again(tmp_path):
    from jax._src import compilation_cache

    env = {**os.environ, "RLFIT_CACHE_DIR": str(tmp_path), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}

    def run() -> tuple[dict, list[str]]:
        done = subprocess.run([sys.executable, "-c", LOOKUPS], env=env, capture_output=True, text=True, check=True)
        return (json.loads(done.stdout.strip().splitlines()[-1]),
                [line for line in done.stderr.splitlines() if line.startswith("rlfit: note:")])

    first, first_notes = run()
    assert first == {"from_cache": dict.fromkeys(("garbled", "cut_short", "unloadable", "whole"), False),
                     "cache_used": True} and first_notes == []
    entry = {name: next((tmp_path / "jax").glob(f"jit_{name}-*-cache")) for name in ("garbled", "cut_short",
                                                                                      "unloadable")}
    data = bytearray(entry["garbled"].read_bytes())  # 32 bytes in the middle inverted: zlib's checksum fails
    data[len(data) // 2:len(data) // 2 + 32] = bytes(255 - byte for byte in data[len(data) // 2:len(data) // 2 + 32])
    entry["garbled"].write_bytes(bytes(data))
    entry["cut_short"].write_bytes(entry["cut_short"].read_bytes()[:100])  # a kill -9 or a full disk while writing
    # decompresses, but is no executable: XLA refuses it
    entry["unloadable"].write_bytes(compilation_cache.compress_executable(b"\0\0\0\1not an executable"))

    second, second_notes = run()
    assert second == {"from_cache": {"garbled": False, "cut_short": False, "unloadable": False, "whole": True},
                      "cache_used": True}
    assert len(second_notes) == 3, second_notes
    for name, path in entry.items():
        (note,) = [note for note in second_notes if f"damaged cache entry {path} (" in note]
        assert "removed it, so its program is compiled again and rewritten" in note, note
        compilation_cache.decompress_executable(path.read_bytes())  # written again, whole

    third, third_notes = run()
    assert third == {"from_cache": dict.fromkeys(("garbled", "cut_short", "unloadable", "whole"), True),
                     "cache_used": True} and third_notes == []
