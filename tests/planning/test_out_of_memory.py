"""Out-of-memory recognition, against synthetic messages and a genuine XLA out-of-memory under `ulimit -v`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlfit.planning import is_out_of_memory

REPO_ROOT = Path(__file__).resolve().parents[2]
VIRTUAL_MEMORY_LIMIT_KB = 3_000_000
"""`ulimit -v` for the subprocess: JAX starts (about 0.5 GB of address space) but a 2 GB buffer cannot be had."""


def test_xla_messages_are_out_of_memory():
    assert is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes."))
    assert is_out_of_memory(RuntimeError("INTERNAL: Error dispatching computation: Out of memory allocating 42 bytes."))


def test_other_errors_are_not():
    assert not is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total)"))
    assert not is_out_of_memory(MemoryError("Unable to allocate 7.45 GiB for an array"))
    assert not is_out_of_memory(RuntimeError("INVALID_ARGUMENT: shapes do not match"))
    assert not is_out_of_memory(ValueError("RESOURCE_EXHAUSTED"))  # not a runtime error from JAX


def test_out_of_memory_as_the_cause_of_another_error():
    try:
        try:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 1 bytes.")
        except RuntimeError as error:
            raise KeyError("while compiling") from error
    except KeyError as wrapped:
        assert is_out_of_memory(wrapped)


GENUINE_OOM = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp
    import numpy as np
    from rlfit.algos.ppo.sizes import BatchSizes
    from rlfit.algos.ppo.candidates import smaller_sizes
    from rlfit.planning import is_out_of_memory

    def error_of(thunk):
        try:
            thunk()
        except BaseException as error:  # noqa: BLE001
            return error

    def describe(error):
        return {"type": type(error).__name__, "module": type(error).__module__, "memory_error": isinstance(error, MemoryError),
                "oom": is_out_of_memory(error), "message": str(error)[:200]}

    # 1. an output buffer of 40000 x 40000 float32 = 6.4 GB, compiled and run
    outer = jax.jit(lambda v: v[:, None] * v[None, :])
    direct = error_of(lambda: outer(jnp.ones(40000)).block_until_ready())

    # 2. the back-off path: memory grows with num_envs (16384 floats per env); halve until it runs
    def iteration(sizes):
        out = jax.jit(lambda a, b: a * b + 1.0)(jnp.ones((sizes.num_envs, 1)), jnp.ones((1, 16384)))
        return float(out[0, 0])

    sizes, events = BatchSizes(65536, 65536, 4, 8), []
    while sizes is not None:
        error = error_of(lambda: iteration(sizes))
        if error is None:
            break
        events.append({"num_envs": sizes.num_envs, **describe(error)})
        if not is_out_of_memory(error):
            break
        sizes = smaller_sizes(sizes)

    # 3. a host (numpy) allocation under the same limit: Python's MemoryError, not XLA's
    host = error_of(lambda: np.ones(10**9))
    print(json.dumps({"direct": describe(direct), "events": events, "final": sizes and sizes._asdict(),
                      "host": describe(host)}))
""")


@pytest.fixture(scope="module")
def genuine_oom() -> dict:
    """Runs GENUINE_OOM in a subprocess whose address space is capped with `ulimit -v`."""
    command = f"ulimit -v {VIRTUAL_MEMORY_LIMIT_KB}; exec {sys.executable} -c \"$RLFIT_SCRIPT\""
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=240, cwd=REPO_ROOT,
                            env={"PATH": "/usr/bin:/bin", "RLFIT_SCRIPT": GENUINE_OOM, "JAX_PLATFORMS": "cpu",
                                 "PYTHONPATH": str(REPO_ROOT / "src")})
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_genuine_xla_out_of_memory_is_recognised(genuine_oom):
    direct = genuine_oom["direct"]
    assert direct["type"] == "JaxRuntimeError" and not direct["memory_error"]
    assert "RESOURCE_EXHAUSTED" in direct["message"]
    assert direct["oom"] is True


def test_back_off_after_a_genuine_out_of_memory_reaches_a_configuration_that_runs(genuine_oom):
    events = genuine_oom["events"]
    assert events, "the largest configuration should not have fitted under the limit"
    assert all(e["type"] == "JaxRuntimeError" and e["oom"] for e in events)
    assert [e["num_envs"] for e in events] == [65536 // 2**k for k in range(len(events))]
    final = genuine_oom["final"]
    assert final is not None and final["num_envs"] == 65536 // 2 ** len(events)


def test_a_host_memory_error_is_not_taken_for_xla_out_of_memory(genuine_oom):
    host = genuine_oom["host"]
    assert host["memory_error"] and host["type"] == "MemoryError"
    assert host["oom"] is False
