"""MJX's first import skips NVIDIA Warp where JAX has no CUDA: each case of MJX's import in a fresh interpreter (MJX is
imported once per process); the CLI's refusal of env.impl=warp on a CPU in this one."""

from __future__ import annotations

import importlib.abc
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from rlfit.errors import UserError
from rlfit.hardware import warp_import

IMPORT_MJX = (
    "import json, sys\n"
    "import rlfit\n"
    "import mujoco_playground\n"
    "import mujoco.mjx.warp as mjx_warp\n"
    "state = {'mjx_has_warp': mjx_warp.WARP_INSTALLED, 'blocked': [n for n in ('warp', "
    "'mujoco.mjx.third_party.mujoco_warp') if n in sys.modules and sys.modules[n] is None]}\n"
    "import warp\n"
    "state['warp_importable'] = hasattr(warp, '__version__')\n"
    "print('RESULT ' + json.dumps(state))\n")


def fresh_python(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("RLFIT_MJX_WARP", "JAX_PLATFORMS")}
    return subprocess.run([sys.executable, "-c", code], env={**environment, **env}, capture_output=True, text=True,
                          check=True)


def result(done: subprocess.CompletedProcess) -> dict:
    return json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])


IMPORT_MJX_AND_STEP = IMPORT_MJX.replace("import warp\n", (
    "import jax, jax.numpy as jnp, numpy as np\n"
    "from mujoco import mjx\n"
    "from mujoco_playground import registry\n"
    "model = registry.load('CartpoleBalance', config_overrides={'impl': 'jax'}).mjx_model\n"
    "physics = mjx.make_data(model).replace(qpos=jnp.array([0.1, 0.2]), ctrl=jnp.full(model.nu, 0.3))\n"
    "step = jax.jit(mjx.step)\n"
    "for _ in range(5): physics = step(model, physics)\n"
    "state['physics'] = [np.asarray(physics.qpos).tolist(), np.asarray(physics.qvel).tolist()]\n"
    "import warp\n"))
"""IMPORT_MJX, and before Warp's import five MJX steps (`mjx.step`, which Playground's `step` runs for its physics)
of CartpoleBalance's model (impl jax) from a tilted pole, pushed: what MJX computes. (MJX's own step rather than
the environment's reset and step: the same physics at two thirds of the tracing and compiling.)"""


@pytest.fixture(scope="module")
def mjx_imported():
    """{RLFIT_MJX_WARP: IMPORT_MJX_AND_STEP's process} on a CPU-only JAX, without ("") and with ("1") the variable:
    one fresh interpreter each, shared by the tests of MJX's import and of its physics. Both compile into the
    session's cache: the second reads the first's programs where its traced program is the same (Warp's import
    changing what MJX traces would change the cache key, and the second would compile its own)."""
    cache = {"JAX_COMPILATION_CACHE_DIR": os.environ["RLFIT_CACHE_DIR"], "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    return {"": fresh_python(IMPORT_MJX_AND_STEP, JAX_PLATFORMS="cpu", **cache),
            "1": fresh_python(IMPORT_MJX_AND_STEP, JAX_PLATFORMS="cpu", RLFIT_MJX_WARP="1", **cache)}


def test_on_a_cpu_only_jax_mjx_finds_warp_missing_silently_and_warp_imports_afterwards(mjx_imported):
    done = mjx_imported[""]
    assert {k: v for k, v in result(done).items() if k != "physics"} == {
        "mjx_has_warp": False, "blocked": [], "warp_importable": True}
    assert "Failed to import" not in done.stdout + done.stderr


def test_rlfit_mjx_warp_keeps_mjx_import_as_it_is(mjx_imported):
    assert result(mjx_imported["1"])["mjx_has_warp"] is True


def test_without_rlfit_mjx_imports_warp():
    """The reference: MJX on its own, in this environment, has Warp (so the cases above are rlfit's doing)."""
    code = IMPORT_MJX.replace("import rlfit\n", "")
    assert result(fresh_python(code, JAX_PLATFORMS="cpu"))["mjx_has_warp"] is True


def test_a_cuda_plugin_or_a_gpu_platform_means_warp_is_wanted(tmp_path, monkeypatch):
    plugin = tmp_path / "jax_plugins" / "xla_cuda12"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("")
    code = "from rlfit.hardware.warp_import import cuda_possible as c; print('RESULT', c())"
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    outputs = {platforms: fresh_python(code, **env, **({"JAX_PLATFORMS": platforms} if platforms else {}))
               .stdout.split()[-1] for platforms in ("", "cuda,cpu", "cpu")}
    assert outputs == {"": "True", "cuda,cpu": "True", "cpu": "False"}
    assert fresh_python(code).stdout.split()[-1] == "False"  # no plugin installed here


def test_mjx_steps_the_same_with_and_without_warp_imported(mjx_imported):
    """The physics MJX computes (impl jax) does not depend on whether Warp was imported."""
    without, with_warp = (result(mjx_imported[variable])["physics"] for variable in ("", "1"))
    assert without == with_warp and len(without[0]) > 0


class _PrintingLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        import importlib

        print("Failed to import warp: halted")
        print("a line of its own")
        for name in warp_import.BLOCKED:
            with pytest.raises(ImportError):
                importlib.import_module(name)
        module.ran = True


def test_the_loader_drops_only_mjx_notes_and_restores_the_modules(monkeypatch):
    sentinel = object()
    monkeypatch.setitem(sys.modules, "warp", sentinel)
    module = type(sys)("fake")
    printed = io.StringIO()
    with redirect_stdout(printed):
        warp_import._LoaderWithoutWarp(_PrintingLoader()).exec_module(module)
    assert module.ran and printed.getvalue() == "a line of its own\n"
    assert sys.modules["warp"] is sentinel
    assert "mujoco.mjx.third_party.mujoco_warp" not in sys.modules or sys.modules[
        "mujoco.mjx.third_party.mujoco_warp"] is not None


def test_warp_asked_for_on_a_cpu_is_one_line():
    from rlfit.envs.loading import choose_impl

    with pytest.raises(UserError, match="env.impl=warp needs a CUDA GPU.*use env.impl=jax"):
        choose_impl("warp", "cpu")
    assert choose_impl("auto", "cpu") == "jax" and choose_impl("warp", "gpu") == "warp"


def test_the_cli_refuses_warp_on_a_cpu_with_exit_2(tmp_path, capfd):
    """`rlfit train` as a user runs it, in this process (`cli_in_process`): the refusal needs no fresh import state."""
    from tests.conftest import cli_in_process

    done = cli_in_process(capfd, "train", "CartpoleBalance", "--preset", "smoke", "--set", "env.impl=warp",
                          "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "env.impl=warp" in done.stderr
    assert not Path(tmp_path / "run").exists()
