"""What the project asks pip for: MuJoCo 4.0.0, whose sparse-Cholesky solver has a bug fixed in 4.0.1, is excluded
from the requirements and from the wheels the GPU check carries (benchmarks/gpu_bundle.py, device_setup.sh)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
BROKEN_MUJOCO = "4.0.0"
FIXED_MUJOCO = "4.0.1"


def mujoco_requirement() -> Requirement:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (found,) = [Requirement(line) for line in dependencies if Requirement(line).name == "mujoco"]
    return found


def test_the_mujoco_requirement_excludes_4_0_0_and_admits_its_fix():
    specifier = mujoco_requirement().specifier
    assert not specifier.contains(BROKEN_MUJOCO)
    assert specifier.contains(FIXED_MUJOCO) and specifier.contains("3.3.0")


def pinned(text: str, name: str) -> list[str]:
    """The versions `name==X` pins in `text` (a shell array or a Python tuple of requirement strings)."""
    return re.findall(rf"(?<![\w-]){re.escape(name)}==([\w.]+)", text)


def test_the_gpu_check_carries_no_mujoco_4_0_0():
    for path in (REPO / "benchmarks" / "gpu_bundle.py", REPO / "benchmarks" / "device_setup.sh"):
        text = path.read_text()
        for name in ("mujoco", "mujoco-core"):
            versions = pinned(text, name)
            assert versions, f"{path.name} pins no {name}"
            assert all(mujoco_requirement().specifier.contains(v) for v in versions), (path.name, name, versions)
