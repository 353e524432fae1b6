"""Out-of-memory back-off end to end: a genuine XLA RESOURCE_EXHAUSTED (address space capped with
`ulimit -v`) makes the runner fall back to smaller sizes, recompile and finish the run, recording why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIMIT_KB = 4_000_000  # JAX and rlfit start in ~1 GB of address space; 131072 envs need far more than 4 GB
NUM_ENVS = 131072
"""Its iteration allocates 5.0 GB (XLA's RESOURCE_EXHAUSTED, measured); here 65536 (2.5 GB beside JAX's ~1 GB) did
not fit either and 32768 did: two halvings, each a compile (262144, which needs 10 GB, only added a third)."""


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory) -> Path:
    """One compile cache for this module's runs: both start by compiling the same program at NUM_ENVS."""
    return tmp_path_factory.mktemp("oom-cache")


def train_capped(cache, run, *extra):
    """`rlfit train` of NUM_ENVS toy environments with the address space capped; the finished process."""
    args = ["train", "tests.toy_env:make", "--preset", "smoke", "--set", "env.episode_length=50",
            "--set", f"ppo.num_envs={NUM_ENVS}", "--set", f"ppo.batch_size={NUM_ENVS}", "--set", "ppo.num_minibatches=1",
            "--set", "ppo.unroll_length=16", "--set", "network.value_hidden=[64,64]", "--set", "run.num_eval_envs=8",
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
