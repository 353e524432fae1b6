"""The G1 smoke run the G1 test files share: `rlfit train G1JoystickFlatTerrain --preset smoke --set
env.observation_set=robot` with the offline Menagerie copy (../shared beside the checkout, as CI lays it out), once
per test session whichever pytest-xdist worker asks first.

G1 compiles for minutes on a 2-core CPU. tests/run/test_g1.py checks the run (and plays, exports and transfer-checks
its policy); tests/planning/test_randomization_memory.py compiles the same training step for XLA's memory analysis,
which is a hit in the test session's compile cache (tests/conftest.py) only once the run has written it: its G1
tests wait for the run (`g1_smoke_run`) rather than compile the step a second time beside it. The run is made under
a file lock in the folder the session's workers share; a worker that finds it made (or failed: its error is kept)
returns it without training again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_MENAGERIE = (REPO_ROOT / ".." / "shared" / "assets" / "mujoco_menagerie").resolve()
G1 = "G1JoystickFlatTerrain"
ROBOT_SET = "env.observation_set=robot"
"""The shared run's policy observes what the robot measures: G1's 103 entries less the pelvis linear velocity."""
HAS_MENAGERIE = (SHARED_MENAGERIE / "unitree_g1" / "assets").is_dir()
NEEDS_MENAGERIE = pytest.mark.skipif(not HAS_MENAGERIE,
                                     reason=f"the offline Menagerie copy is absent ({SHARED_MENAGERIE}); see its README")


def rlfit_cli(*args: str, cwd: Path, timeout: float = 1500) -> subprocess.CompletedProcess:
    """`python -m rlfit ARGS` in `cwd` with this checkout's rlfit (then tests.*) first and the offline assets."""
    sources = os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])
    env = {**os.environ, "PYTHONPATH": sources, "RLFIT_MENAGERIE_PATH": str(SHARED_MENAGERIE)}
    return subprocess.run([sys.executable, "-m", "rlfit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this test session sees: the workers' common parent under pytest-xdist, else the
    session's own base folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def g1_smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared G1 smoke run's directory (made by the first worker to ask; the others wait for it: an exclusive
    `flock` on a file beside it, which the system releases if its worker dies)."""
    import fcntl

    if not HAS_MENAGERIE:
        pytest.skip(f"the offline Menagerie copy is absent ({SHARED_MENAGERIE}); see its README")
    workdir = session_folder(tmp_path_factory) / "g1-smoke"
    run_dir, failed = workdir / "run", workdir / "failed.txt"
    with open(str(workdir) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (run_dir / "summary.json").is_file() and not failed.is_file():
            workdir.mkdir(exist_ok=True)
            result = rlfit_cli("train", G1, "--preset", "smoke", "--set", ROBOT_SET, "--run-dir", str(run_dir),
                               "--quiet", cwd=workdir)
            if result.returncode != 0:
                failed.write_text(f"exit code {result.returncode}\n{result.stderr[-3000:]}")
    assert not failed.is_file(), failed.read_text()
    return run_dir
