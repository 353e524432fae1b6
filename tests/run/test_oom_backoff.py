"""Out-of-memory back-off end to end: a genuine XLA RESOURCE_EXHAUSTED (address space capped with
`ulimit -v`) makes the runner fall back to smaller sizes, recompile and finish the run, recording why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIMIT_KB = 4_000_000  # JAX and rlfit start in ~1 GB of address space; 65536 envs need more than the 3 GB left
NUM_ENVS = 65536
"""Its iteration allocates 2.5 GB at once, which does not fit (XLA's RESOURCE_EXHAUSTED, measured), and 32768's 1.27 GB
does: one halving, one compile more (131072, 5.0 GB, added a second halving and compile; 262144 a third). Measured
(2026-11-28): 32768 fits under 3.5 GB but not 3.0, and 65536 fails under 3.5 and 4.0, so LIMIT_KB sits about halfway
between what the one size needs and what the other does."""


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory) -> Path:
    """One compile cache for this module's runs: both start by compiling the same program at NUM_ENVS."""
    return tmp_path_factory.mktemp("oom-cache")


def train_capped(cache, run, *extra):
    """`rlfit train` of NUM_ENVS toy environments with the address space capped; the finished process."""
    args = ["train", "tests.toy_env:make", "--preset", "smoke", "--set", "env.episode_length=50",
            "--set", f"ppo.num_envs={NUM_ENVS}", "--set", f"ppo.batch_size={NUM_ENVS}", "--set", "ppo.num_minibatches=1",
            "--set", "ppo.unroll_length=16", "--set", "ppo.value_hidden=[64,64]", "--set", "run.num_eval_envs=8",
            "--timesteps", "1", "--run-dir", str(run), "--quiet", *extra]
    command = f"ulimit -v {LIMIT_KB}; exec {sys.executable} -m rlfit " + " ".join(f"'{a}'" for a in args)
    env = dict(os.environ, PYTHONPATH=str(REPO), RLFIT_CACHE_DIR=str(cache))
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=900)


def test_out_of_memory_backs_off_to_a_size_that_fits(tmp_path, compile_cache):
    run = tmp_path / "run"
    result = train_capped(compile_cache, run)
    assert result.returncode == 0, result.stderr[-3000:]

    summary = json.loads((run / "summary.json").read_text())
    events = summary["events"]
    assert events, f"{NUM_ENVS} environments should not fit in 4 GB of address space"
    assert all(e["event"] == "out_of_memory_backoff" and "RESOURCE_EXHAUSTED" in e["error"] for e in events)
    sizes = [e["from"]["num_envs"] for e in events] + [events[-1]["to"]["num_envs"]]
    assert sizes == [NUM_ENVS // 2**k for k in range(len(sizes))]  # halved each time
    assert summary["sizes"]["num_envs"] == sizes[-1]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = [{k: v for k, v in r.items() if k != "time"} for r in rows if r["kind"] == "event"]
    assert logged == [{"kind": "event", **e} for e in events]  # metrics rows also carry their wall-clock time
    assert [r["iteration"] for r in rows if r["kind"] == "train"] == [1]
    plan = json.loads((run / "plan.json").read_text())
    assert plan["sizes"]["num_envs"] == sizes[-1] and "out of memory" in plan["reasons"][-1]


def test_out_of_memory_without_backoff_stops_with_exit_code_5(tmp_path, compile_cache):
    run = tmp_path / "run"
    result = train_capped(compile_cache, run, "--set", "run.oom_backoff=false")
    assert result.returncode == 5, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"rlfit: error: out of device memory at ppo.num_envs={NUM_ENVS} (run.oom_backoff=false); lower ppo.num_envs, "
        "use --num-envs auto, or set run.oom_backoff=true"]
    assert not (run / "summary.json").exists()
    assert json.loads((run / "plan.json").read_text())["sizes"]["num_envs"] == NUM_ENVS  # no back-off happened


def test_a_second_out_of_memory_before_the_first_back_offs_sizes_were_saved_reloads_the_saved_sizes(tmp_path,
                                                                                                     monkeypatch):
    """In process, RESOURCE_EXHAUSTED injected while compiling at more than 8 environments: the first back-off
    (32 -> 16) reloads the starting checkpoint (32 environments); the second (16 -> 8) comes before 16 was saved,
    so it must read that checkpoint with the sizes its own record names. No host copy of the state is kept: the
    checkpoint is the fallback."""
    import jax

    import rlfit
    from rlfit.run.trainer import Trainer
    from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES

    compile_sizes = []
    real_compile = Trainer.compile

    def compile_or_run_out(self, state=None, say=None, **options):
        compile_sizes.append(self.plan.sizes.num_envs)
        if self.plan.sizes.num_envs > 8:
            raise jax.errors.JaxRuntimeError(f"RESOURCE_EXHAUSTED: injected at num_envs={self.plan.sizes.num_envs}")
        return real_compile(self, state, say, **options)

    monkeypatch.setattr(Trainer, "compile", compile_or_run_out)
    device_gets = []
    real_device_get = jax.device_get
    monkeypatch.setattr(jax, "device_get", lambda tree: device_gets.append(tree) or real_device_get(tree))
    overrides = [o for o in TOY_TRAIN_OVERRIDES if not o.startswith("run.num_timesteps")] + ["run.num_timesteps=5120"]
    result = rlfit.train(TOY_ENV, "smoke", overrides=overrides, run_dir=tmp_path / "run")
    assert compile_sizes == [32, 16, 8]
    events = result.summary["events"]
    assert [(e["from"]["num_envs"], e["to"]["num_envs"]) for e in events] == [(32, 16), (16, 8)]
    assert result.summary["sizes"]["num_envs"] == 8 and result.summary["iterations"] >= 1
    assert not any(hasattr(tree, "params") for tree in device_gets)  # no host copy of the whole state


def test_a_process_that_runs_out_of_memory_alone_stops_the_run_in_one_line_instead_of_waiting_forever(monkeypatch):
    """Over several processes a back-off needs every process: one that ran out of memory alone (the others never
    reach the barrier, here a stand-in for the coordination service) stops with exit code 5 and one line."""
    from types import SimpleNamespace

    from rlfit.run import recover
    from rlfit.planning.out_of_memory import OutOfMemory

    waited = []
    monkeypatch.setattr(recover, "process_count", lambda: 2)
    monkeypatch.setattr(recover, "all_reach", lambda name, timeout_s: waited.append((name, timeout_s)) or False)

    def trainer(backoff: bool) -> SimpleNamespace:
        config = SimpleNamespace(algo="sac", run=SimpleNamespace(oom_backoff=backoff))
        return SimpleNamespace(config=config, plan=SimpleNamespace(sizes=SimpleNamespace(num_envs=64)))

    with pytest.raises(OutOfMemory, match=r"^out of device memory at sac.num_envs=64 on process 0 but not on every "
                                          r"process of the run within 120 s, so it cannot back off; lower "
                                          r"sac.num_envs or use --num-envs auto$") as stopped:
        recover.agree_to_back_off(trainer(True), backoffs_so_far=1)  # one back-off before this one
    assert stopped.value.exit_code == 5
    assert waited == [("rlfit-out-of-memory-1", recover.BACK_OFF_WAIT_S)]
    recover.agree_to_back_off(trainer(False), 1)  # without back-off nothing waits: each process stops on its own
    assert len(waited) == 1
    monkeypatch.setattr(recover, "all_reach", lambda name, timeout_s: True)
    recover.agree_to_back_off(trainer(True), 1)  # every process got there: they back off together
