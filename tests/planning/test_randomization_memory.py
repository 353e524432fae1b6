"""The memory planner counts the randomized model batch: `rlfit plan` with and without randomization
(CartpoleBalance with the tests' randomizer), and G1 with Playground's randomizer: the batch in the lowered step at
two sizes, and the bound against XLA's analysis of the compiled step at one (the offline Menagerie copy; G1 traces
and compiles for minutes on two cores).

G1's step at 8 environments, on the robot's observation set, is the one the G1 smoke run that tests/run/test_g1.py
checks trains (its preset's sizes and set: tests/g1_smoke.py): compiled here with the training step's own compiler
options, it is one compile for both through the test session's cache (and one trace, through the program store). The
G1 tests here wait for that run (made once per session, by whichever worker asks first) rather than compile the step
beside it: two compiles at once would both miss the cache. XLA's memory analysis is the same under a probe's cheaper
options (tests/planning/test_memory.py), which the test session's XLA_FLAGS set for every compile anyway."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from rlfit.algos.ppo.candidates import scale_sizes
from rlfit.config.schema import resolve
from rlfit.hardware.jax_setup import compiler_options, configure_jax
from rlfit.hardware.program_memory import lowered_bound
from rlfit.hardware.units import format_bytes
from rlfit.planning.plan import config_sizes
from rlfit.run.probes import analyze_compiled, lower_iteration
from tests.conftest import cli_in_process
from tests.g1_smoke import G1, ROBOT_SET, SHARED_MENAGERIE

pytestmark = pytest.mark.slow

G1_FIELDS = ("body_mass", "dof_armature", "dof_frictionloss", "pair_friction", "qpos0")
"""What Playground 0.2.0's G1 randomizer draws per environment."""


def test_rlfit_plan_shows_the_randomized_batch(capfd, tmp_path):
    plan = ("plan", "CartpoleBalance", "--preset", "smoke", "--json")
    on = cli_in_process(capfd, *plan, "--set", "env.randomization=tests.envs.randomizers:scaled_masses", cwd=tmp_path)
    off = cli_in_process(capfd, *plan, "--set", "env.randomization=off", cwd=tmp_path)
    assert on.returncode == off.returncode == 0, on.stderr + off.stderr
    on_plan, off_plan = json.loads(on.stdout), json.loads(off.stdout)
    chosen = on_plan["chosen"]["num_envs"]
    batch = chosen * 20  # body_mass [2] and dof_damping [3], float32, per environment
    assert on_plan["randomization"]["bytes_per_env"] == 20
    assert on_plan["reasons"][-1].endswith(f"; {format_bytes(batch)} at num_envs={chosen}, counted in the predictions")
    assert off_plan["reasons"][-1] == "domain randomization: off (env.randomization: off)"
    on_point, off_point = on_plan["memory_model"]["points"][0], off_plan["memory_model"]["points"][0]
    assert on_point["num_envs"] == off_point["num_envs"] == chosen
    assert on_point["argument_bytes"] - off_point["argument_bytes"] == batch  # the batch is an argument of the step


@pytest.fixture(scope="module")
def g1(g1_smoke_run):
    """(the shared G1 smoke run's config, G1 loaded for the CPU), once the run has filled the caches."""
    import os

    from rlfit.envs import load_env

    os.environ.setdefault("RLFIT_MENAGERIE_PATH", str(SHARED_MENAGERIE))
    configure_jax("fp32")
    config = resolve(G1, "smoke", overrides=["env.randomization=auto", ROBOT_SET])
    return config, load_env(config.env, "cpu")


@pytest.fixture(scope="module")
def lowered_g1(g1):
    """`lowered_g1(num_envs)` -> (G1's step lowered with randomization on, its Trainer), traced once per size."""
    config, env = g1
    made = {}

    def lowered(num_envs: int):
        if num_envs not in made:
            made[num_envs] = lower_iteration(config, scale_sizes(config_sizes(config), num_envs), env)
        return made[num_envs]

    return lowered


def state_bytes(tree) -> int:
    """Bytes of every array of an (abstract) state, from its shapes and dtypes."""
    return sum(int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize for leaf in jax.tree.leaves(tree))


@pytest.mark.parametrize("num_envs", [4, 8])
def test_g1s_randomized_step_holds_its_model_batch_at_each_size(lowered_g1, num_envs):
    """At each size, the bound read from the lowered step (the planner's prediction without compiling) holds the
    randomized batch exactly: its arguments are the training state's arrays to the byte, the model batch among them,
    and that batch is num_envs times the bytes per environment of Playground's five fields."""
    lowered, trainer = lowered_g1(num_envs)
    assert trainer.randomization.source == f"playground:{G1}" and trainer.randomization.fields == G1_FIELDS
    state = trainer.abstract_state()
    assert sorted(state.env_state.models) == list(G1_FIELDS)
    assert state_bytes(state.env_state.models) == num_envs * trainer.randomization.bytes_per_env
    assert lowered_bound(lowered).argument_bytes == state_bytes(state)


def test_g1s_randomized_step_is_estimated_within_the_planners_allowances(g1, lowered_g1):
    """The estimate the planner uses, with its margin, is not below XLA's analysis of the compiled step, and lies
    under ESTIMATE_OVER_XLA_AT_MOST times it (+51% when written: not within
    issue 65's 10% here); the bound is not below XLA's figure; at the smoke run's 8 environments, whose
    compile tests/run/test_g1.py shares (a G1 compile is a minute on two cores; the batch's scaling is checked at
    two sizes above)."""
    from rlfit.planning.budget import SAME_BACKEND_MARGIN
    from rlfit.planning.measure import ESTIMATE_OVER_XLA_AT_MOST

    config, _ = g1
    lowered, trainer = lowered_g1(8)
    sizes = scale_sizes(config_sizes(config), 8)
    bound = lowered_bound(lowered)
    xla = analyze_compiled(config, sizes, lowered.compile(compiler_options=compiler_options(trainer.step_ynn_fusions)))
    assert xla.total_bytes <= bound.argument_bytes + bound.output_bytes + bound.temp_bytes
    assert xla.total_bytes <= bound.estimate_bytes * SAME_BACKEND_MARGIN
    assert bound.estimate_bytes <= ESTIMATE_OVER_XLA_AT_MOST * xla.total_bytes
