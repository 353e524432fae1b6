"""benchmarks/gpu_bundle.py: the offline install from a local folder of wheels (the machine's jax left alone) and
the size that would travel to the GPU machine."""

from __future__ import annotations

import base64
import hashlib
import importlib
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def gpu_bundle(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("gpu_bundle")


def make_wheel(folder: Path, name: str, version: str = "1.0") -> Path:
    """A pure-Python wheel of one module `name` whose `VERSION` is `version` (what pip needs, nothing more)."""
    dist_info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n".encode(),
             f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()}"
                     f",{len(data)}\n" for path, data in files.items()) + f"{dist_info}/RECORD,,\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in {**files, f"{dist_info}/RECORD": record.encode()}.items():
            archive.writestr(path, data)
    return wheel


def test_install_puts_the_wheels_in_their_folder_leaves_jax_out_and_unpacks_the_assets(gpu_bundle, tmp_path):
    wheels = tmp_path / "bundle" / "wheels"
    wheels.mkdir(parents=True)
    for name in ("rlfit_dummy_mujoco", "jax", "jaxlib", "jax_cuda12_plugin", "jaxopt"):
        make_wheel(wheels, name)
    robot = tmp_path / "menagerie" / "unitree_g1" / "assets"
    robot.mkdir(parents=True)
    (robot / "pelvis.STL").write_bytes(b"solid mesh")
    with tarfile.open(tmp_path / "bundle" / gpu_bundle.ASSETS_ARCHIVE, "w:xz") as archive:
        archive.add(tmp_path / "menagerie" / "unitree_g1", arcname="mujoco_menagerie/unitree_g1")

    site = tmp_path / "machine" / "site"
    found = gpu_bundle.install(tmp_path / "bundle", site)

    assert sorted(found["installed"]) == ["jaxopt-1.0-py3-none-any.whl", "rlfit_dummy_mujoco-1.0-py3-none-any.whl"]
    assert sorted(found["left_out"]) == ["jax-1.0-py3-none-any.whl", "jax_cuda12_plugin-1.0-py3-none-any.whl",
                                         "jaxlib-1.0-py3-none-any.whl"]
    assert (site / "rlfit_dummy_mujoco" / "__init__.py").read_text() == "VERSION = '1.0'\n"
    assert (site / "jaxopt").is_dir()
    assert not (site / "jax").exists() and not (site / "jaxlib").exists() and not (site / "jax_cuda12_plugin").exists()
    menagerie = Path(found["menagerie"])
    assert (menagerie / "unitree_g1" / "assets" / "pelvis.STL").read_bytes() == b"solid mesh"


def test_install_without_wheels_names_the_fix(gpu_bundle, tmp_path):
    (tmp_path / "bundle" / "wheels").mkdir(parents=True)
    make_wheel(tmp_path / "bundle" / "wheels", "jax")
    with pytest.raises(SystemExit, match="gpu_bundle.py prepare"):
        gpu_bundle.install(tmp_path / "bundle", tmp_path / "site")


def test_transfer_size_counts_what_git_would_copy_and_the_carried_folder(gpu_bundle, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / ".gitignore").write_text("/.gpu/\n/big.bin\n")  # 16 bytes
    (repo / "tracked.py").write_bytes(b"x" * 100)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    (repo / "untracked.txt").write_bytes(b"y" * 40)  # not ignored: it travels
    (repo / "big.bin").write_bytes(b"z" * 10_000)  # ignored and not carried: it stays
    (repo / ".gpu" / "wheels").mkdir(parents=True)
    (repo / ".gpu" / "wheels" / "a.whl").write_bytes(b"w" * 1_000)
    (repo / ".gpu" / "menagerie.tar.xz").write_bytes(b"m" * 500)

    size = gpu_bundle.transfer_size(repo, [repo / ".gpu"])

    assert size["working_tree_bytes"] == 16 + 100 + 40
    assert size["carried_bytes"] == {".gpu": 1_500}
    assert size["total_bytes"] == 1_656 and size["fits"]
    (repo / ".gpu" / "wheels" / "huge.whl").write_bytes(b"h" * gpu_bundle.TRANSFER_LIMIT_BYTES)
    assert not gpu_bundle.transfer_size(repo, [repo / ".gpu"])["fits"]


def test_only_jax_jaxlib_and_jax_cuda_plugins_count_as_jax(gpu_bundle):
    names = ["jax-0.11.2-py3-none-any.whl", "jaxlib-0.11.2-cp312-cp312-manylinux_2_27_x86_64.whl",
             "jax_cuda12_plugin-0.11.2-cp312-cp312-manylinux_2_27_x86_64.whl", "jaxopt-0.8.5-py3-none-any.whl",
             "mujoco_mjx-3.17.0-py3-none-any.whl"]
    assert [gpu_bundle.is_jax_wheel(Path(name)) for name in names] == [True, True, True, False, False]
