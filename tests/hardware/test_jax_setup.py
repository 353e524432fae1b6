"""Which programs compile with XLA's YNNPACK fusions on a CPU, and that turning them off does turn them off."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from rlfit.config.schema import resolve
from rlfit.hardware.jax_setup import _cpu_options_known
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu" or not _cpu_options_known(),
                                reason="YNNPACK fusions are an option of XLA's CPU backend")


def two_layers(weights, x):
    return jnp.tanh(x @ weights) @ weights


COMPARE = """
import json, jax, jax.numpy as jnp
from rlfit.hardware.jax_setup import compile_ahead
from tests.hardware.test_jax_setup import two_layers
args = (jax.random.normal(jax.random.PRNGKey(0), (64, 64)), jax.random.normal(jax.random.PRNGKey(1), (32, 64)))
default, plain = (compile_ahead(two_layers, *args, ynn_fusions=fusions) for fusions in (True, False))
print(json.dumps({"default_ynn": "ynn" in default.as_text(), "plain_ynn": "ynn" in plain.as_text(),
                  "max_difference": float(jnp.max(jnp.abs(default(*args) - plain(*args))))}))
"""


def test_a_program_compiled_without_ynn_fusions_has_none_and_computes_the_same():
    # XLA's default optimization level, not the suite's fast-compile flags (at level 0 XLA makes no YNNPACK fusions)
    env = {**os.environ, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", COMPARE], env=env, capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["default_ynn"]  # XLA's default hands these matrix products to YNNPACK
    assert not found["plain_ynn"]
    assert found["max_difference"] < 1e-5


@pytest.mark.parametrize("algo, step_fusions", [("ppo", True), ("sac", False)])
def test_sac_steps_compile_without_ynn_fusions_and_ppo_steps_with(toy_env_name, algo, step_fusions):
    config = resolve(toy_env_name, "smoke", None, [f"algo={algo}"])
    trainer = Trainer.build(config, make_plan(config))
    assert trainer.step_ynn_fusions is step_fusions
    assert trainer.learner.ynn_fusions is step_fusions
