"""The starting state's program (`Trainer.starting_state_fn`): traced once for the state's shapes and for its own
program, and the same state to the bit as the program rlfit compiled before (a lambda, traced twice)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer, forget_programs

REPO_ROOT = Path(__file__).resolve().parents[2]


def counting_trainer(config_name: str = "gridworld:Empty-5x5") -> tuple[Trainer, list]:
    """A fresh Trainer (an environment rlfit ships: its programs are stored) whose learner's `init` records each
    trace, with no starting-state function kept from before."""
    forget_programs()
    config = resolve(config_name, "smoke")
    trainer = Trainer.build(config, make_plan(config))
    traces: list = []
    init = trainer.learner.init

    def counted(seed):
        traces.append(seed)  # runs once per trace (inside jit, Python runs only while tracing)
        return init(seed)

    trainer.learner = trainer.learner._replace(init=counted)
    return trainer, traces


def test_a_second_trainer_of_the_same_run_reuses_the_first_ones_trace(tmp_path, monkeypatch):
    """`rlfit train` builds the planner's Trainer, which traces the state's shapes (and stores them), then
    training's, whose program is exported to the store: the same key, one trace."""
    from rlfit.hardware import program_store

    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path)
    planners, traces = counting_trainer()
    planners.abstract_state()
    config = resolve("gridworld:Empty-5x5", "smoke")
    training = Trainer.build(config, make_plan(config))
    training.abstract_state()  # read from the store: no trace
    state, record = training.starting_state()
    assert len(traces) == 1 and record is not None
    other = Trainer.build(resolve("gridworld:Empty-5x5", "smoke", None, ["run.num_eval_envs=3"]),
                          make_plan(config))  # another key (the evaluation's size is in it): its own function
    assert other.starting_state_fn is not training.starting_state_fn
    assert training.starting_state_fn is planners.starting_state_fn


@pytest.mark.parametrize("stored", [True, False])
def test_the_starting_state_is_traced_once_for_its_shapes_and_its_program(tmp_path, monkeypatch, stored):
    """With the program store (empty: a first process) the program's export reuses the shapes' trace; without it,
    its own jit does."""
    from rlfit.hardware import program_store

    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path if stored else None)
    trainer, traces = counting_trainer()
    trainer.abstract_state()
    assert len(traces) == 1
    state, record = trainer.starting_state()
    assert len(traces) == 1  # the program reused the shapes' trace
    assert record is not None and not record.from_store
    assert len(list(tmp_path.glob("*.jaxprog"))) == (1 if stored else 0)  # stored for the next process
    reference = jax.device_get(trainer.learner.init(trainer.config.run.seed))  # operation by operation
    for ours, theirs in zip(jax.tree.leaves(state), jax.tree.leaves(reference), strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


SAME_STATE = """
from rlfit.cli.gc_thresholds import collect_less_often
collect_less_often()  # as an `rlfit` process
import json, os, tempfile
import jax, numpy as np
from rlfit.config.schema import resolve
from rlfit.hardware.jax_setup import compiler_options, configure_jax
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer, forget_programs

os.environ["RLFIT_CACHE_DIR"] = tempfile.mkdtemp()
configure_jax()  # an empty compile cache and program store: a first process's path
config = resolve("CartpoleBalance", "smoke")
trainer = Trainer.build(config, make_plan(config))
init, seed = trainer.learner.init, np.int32(config.run.seed)
# rlfit before: the starting state as a lambda compiled with the evaluation's options
before = jax.jit(lambda s: init(s)).lower(seed).compile(compiler_options=compiler_options(trainer.eval_ynn_fusions))
old = jax.device_get(before(seed))
trainer.abstract_state()
new = jax.device_get(trainer.starting_state()[0])
pairs = list(zip(jax.tree.leaves(old), jax.tree.leaves(new), strict=True))
print(json.dumps({"same_structure": jax.tree.structure(old) == jax.tree.structure(new), "leaves": len(pairs),
                  "different": [i for i, (a, b) in enumerate(pairs)
                                if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes()]}))
"""


@pytest.mark.slow
def test_the_starting_state_is_the_one_rlfit_made_before_to_the_bit():
    """On a MuJoCo environment (CartpoleBalance, its reset a physics forward), compiled with XLA's default flags
    (not the suite's fast-compile ones): the new path's state equals the old program's, leaf by leaf, byte for byte."""
    env = {**os.environ, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", SAME_STATE], env=env, capture_output=True, text=True, cwd=REPO_ROOT,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["same_structure"] and found["leaves"] > 10
    assert found["different"] == []
