"""What travels to the device tool's bare GPU machine for `gpu_check.py`, and its install there.

The machine has CUDA JAX and Python but not MuJoCo or Playground, and no network. It receives the git working
tree (tracked files and untracked files git does not ignore) and up to 8 carried ignored paths, 64 MiB in all.
`gpu_check.py` carries one path, `.gpu/` (ignored), built here by `prepare`:

    .gpu/wheels/              the wheels the check imports (no jax or jaxlib: the machine's CUDA JAX stays)
    .gpu/menagerie.tar.xz     Menagerie's unitree_g1 folder (G1's meshes, 18 MB, 6 MB compressed)

and unpacked there by `install` (pip from the local folder, no index, no dependencies, into a folder of its own).

    .venv/bin/python benchmarks/gpu_bundle.py prepare     # here: download, pack, print the size that travels
    .venv/bin/python benchmarks/gpu_bundle.py size        # the size alone
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MENAGERIE, REPO  # noqa: E402

BUNDLE = REPO / ".gpu"
"""The one carried path (ignored by git)."""
WHEELS = ("mujoco==4.0.1", "mujoco-core==4.0.1", "mujoco-mjx==3.17.0", "playground==0.2.0", "brax==0.14.2",
          "trimesh==5.2.0", "ml-collections==1.1.0", "tensorboardX==2.6.5", "jaxopt==0.8.5", "glfw==2.11.0")
"""What a G1 or CartpoleBalance run imports that the GPU machine lacks (device_setup.sh's list less mediapy and
PyOpenGL, which training never imports: 3.2 MB saved)."""
PLATFORM_ARGS = ("--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                 "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_27_x86_64",
                 "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64")
"""The GPU machine's Python (3.12, x86-64 Linux), as device_setup.sh downloads for it."""
ROBOT = "unitree_g1"
ASSETS_ARCHIVE = "menagerie.tar.xz"
TRANSFER_LIMIT_BYTES = 64 * 2**20
"""The device tool's limit on the working tree and the carried paths together."""


def is_jax_wheel(path: Path) -> bool:
    """True for jax, jaxlib and JAX's CUDA plugins: the machine's own must stay (a CPU jaxlib would replace it)."""
    name = path.name.split("-")[0].lower().replace("_", "-")
    return name in ("jax", "jaxlib") or name.startswith("jax-cuda")


def working_tree_files(repo: Path) -> list[Path]:
    """The files git would copy: tracked and untracked-not-ignored, those that exist."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=repo,
                            capture_output=True, text=True, check=True).stdout
    return [repo / name for name in dict.fromkeys(listed.split("\0")) if name and (repo / name).is_file()]


def folder_bytes(path: Path) -> int:
    """Bytes of the files under `path` (or of `path` itself); 0 when it does not exist."""
    if path.is_file():
        return path.stat().st_size
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file()) if path.is_dir() else 0


def transfer_size(repo: Path, carried: Sequence[Path]) -> dict[str, Any]:
    """What would travel to the GPU machine: the working tree and each carried path, in bytes, against the limit."""
    tree = sum(path.stat().st_size for path in working_tree_files(repo))
    carried_bytes = {str(path.relative_to(repo)): folder_bytes(path) for path in carried}
    total = tree + sum(carried_bytes.values())
    return {"working_tree_bytes": tree, "carried_bytes": carried_bytes, "total_bytes": total,
            "limit_bytes": TRANSFER_LIMIT_BYTES, "fits": total < TRANSFER_LIMIT_BYTES,
            "carried_present": {name: (repo / name).exists() for name in carried_bytes}}


def describe_size(size: dict[str, Any]) -> str:
    parts = [f"working tree {size['working_tree_bytes'] / 2**20:.1f} MiB"]
    parts += [f"{name} {count / 2**20:.1f} MiB" for name, count in size["carried_bytes"].items()]
    verdict = "fits" if size["fits"] else "does NOT fit"
    return f"travels: {', '.join(parts)}; total {size['total_bytes'] / 2**20:.1f} MiB ({verdict} the 64 MiB limit)"


def prepare(bundle: Path = BUNDLE, menagerie: Path = MENAGERIE) -> dict[str, Any]:
    """Downloads the wheels into `bundle`/wheels and packs Menagerie's G1 folder; the size that would travel."""
    wheels = bundle / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for stale in wheels.glob("*.whl"):
        stale.unlink()
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PLATFORM_ARGS, "-d", str(wheels),
                    *WHEELS], check=True)
    robot = menagerie / ROBOT
    if not robot.is_dir():
        raise SystemExit(f"no Menagerie {ROBOT} folder at {robot}: set RLFIT_MENAGERIE_PATH or fetch the assets")
    with tarfile.open(bundle / ASSETS_ARCHIVE, "w:xz") as archive:
        archive.add(robot, arcname=f"mujoco_menagerie/{ROBOT}")
    return transfer_size(REPO, [bundle])


def install(bundle: Path, site: Path) -> dict[str, Any]:
    """Installs `bundle`/wheels into `site` offline (no index, no dependencies), jax and jaxlib left out so the
    machine's CUDA JAX stays, and unpacks the Menagerie archive beside them. What to add to a child's environment:
    `site` first on PYTHONPATH, RLFIT_MENAGERIE_PATH (None when the bundle carries no assets)."""
    started = time.perf_counter()
    wheels = sorted((bundle / "wheels").glob("*.whl"))
    chosen = [path for path in wheels if not is_jax_wheel(path)]
    if not chosen:
        raise SystemExit(f"no wheels in {bundle / 'wheels'}: run `benchmarks/gpu_bundle.py prepare` here and carry "
                         f"{bundle.name}")
    site.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, chosen)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the wheels did not install from {bundle / 'wheels'}:\n{done.stderr[-2000:]}")
    menagerie = None
    archive = bundle / ASSETS_ARCHIVE
    if archive.is_file():
        with tarfile.open(archive) as packed:
            packed.extractall(site.parent / "assets", filter="data")
        menagerie = site.parent / "assets" / "mujoco_menagerie"
    return {"installed": [path.name for path in chosen],
            "left_out": [path.name for path in wheels if is_jax_wheel(path)], "site": str(site),
            "menagerie": None if menagerie is None else str(menagerie),
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("prepare", "size"))
    args = parser.parse_args()
    size = prepare() if args.action == "prepare" else transfer_size(REPO, [BUNDLE])
    print(describe_size(size))
    if not size["fits"]:
        raise SystemExit(2)


if __name__ == "__main__":
    main()
