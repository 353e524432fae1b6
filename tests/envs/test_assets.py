"""Menagerie assets: lookup order, checks with one-line errors, pointing Playground at a folder, offline failure."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rlfit.config.schema import EnvConfig
from rlfit.envs import assets
from rlfit.envs.assets import ENV_VARIABLE, MenagerieChoice, check_menagerie, choose_menagerie, prepare_assets
from rlfit.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_MENAGERIE = (REPO_ROOT / ".." / "shared" / "assets" / "mujoco_menagerie").resolve()
needs_shared_assets = pytest.mark.skipif(
    not (SHARED_MENAGERIE / "unitree_g1" / "assets").is_dir(),
    reason=f"the offline Menagerie copy is absent ({SHARED_MENAGERIE}); see its README in the shared assets")
G1 = "G1JoystickFlatTerrain"


@pytest.fixture
def mjx_env(monkeypatch, tmp_path):
    """Playground's mjx_env with MENAGERIE_PATH restored after the test (and, by default, a missing folder)."""
    from etils import epath
    from mujoco_playground._src import mjx_env

    monkeypatch.setattr(mjx_env, "MENAGERIE_PATH", epath.Path(str(tmp_path / "playground_menagerie")))
    monkeypatch.delenv(ENV_VARIABLE, raising=False)
    return mjx_env


def test_lookup_order_config_then_environment_then_playground_then_download(tmp_path):
    existing = tmp_path / "playground"
    existing.mkdir()
    env = {ENV_VARIABLE: str(tmp_path / "from_env")}
    assert choose_menagerie(str(tmp_path / "from_config"), env, existing) == \
        MenagerieChoice(tmp_path / "from_config", "env.menagerie_path")
    assert choose_menagerie("", env, existing) == MenagerieChoice(tmp_path / "from_env", ENV_VARIABLE)
    assert choose_menagerie("", {}, existing) == MenagerieChoice(existing, "playground")
    assert choose_menagerie("", {}, tmp_path / "missing") == MenagerieChoice(None, "download")


def test_relative_paths_resolve_against_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert choose_menagerie("menagerie", {}, tmp_path).path == tmp_path / "menagerie"


def test_g1_needs_unitree_g1_and_control_suite_needs_nothing(mjx_env):
    assert assets.robot_folders(G1) == ("unitree_g1",)
    assert assets.needs_menagerie(G1)
    assert not assets.needs_menagerie("CartpoleBalance")
    before = mjx_env.MENAGERIE_PATH
    assert prepare_assets(EnvConfig(name="CartpoleBalance", menagerie_path="/nowhere")) is None
    assert mjx_env.MENAGERIE_PATH == before


@needs_shared_assets
def test_config_key_points_playground_at_the_folder_without_copying(mjx_env, tmp_path):
    found = prepare_assets(EnvConfig(name=G1, menagerie_path=str(SHARED_MENAGERIE)))
    assert found == SHARED_MENAGERIE
    assert Path(str(mjx_env.MENAGERIE_PATH)) == SHARED_MENAGERIE
    assert not (tmp_path / "playground_menagerie").exists()
    from mujoco_playground._src.locomotion.g1 import base as g1_base

    read = g1_base.get_assets()  # what Playground's G1 model loads its meshes from
    assert read["pelvis.STL"] == (SHARED_MENAGERIE / "unitree_g1" / "assets" / "pelvis.STL").read_bytes()


@needs_shared_assets
def test_environment_variable_is_used_when_the_config_key_is_empty(mjx_env, monkeypatch):
    monkeypatch.setenv(ENV_VARIABLE, str(SHARED_MENAGERIE))
    assert prepare_assets(EnvConfig(name=G1)) == SHARED_MENAGERIE
    assert Path(str(mjx_env.MENAGERIE_PATH)) == SHARED_MENAGERIE


def test_missing_folder_is_one_line_naming_its_origin(tmp_path):
    with pytest.raises(UserError) as error:
        check_menagerie(MenagerieChoice(tmp_path / "nope", ENV_VARIABLE), ("unitree_g1",), G1)
    message = str(error.value)
    assert "\n" not in message and "does not exist" in message and ENV_VARIABLE in message


def test_robot_folder_instead_of_menagerie_says_use_its_parent(tmp_path):
    (tmp_path / "unitree_g1").mkdir()
    with pytest.raises(UserError, match="point it at its parent"):
        check_menagerie(MenagerieChoice(tmp_path / "unitree_g1", "env.menagerie_path"), ("unitree_g1",), G1)


def test_menagerie_without_the_robot_names_the_missing_folder(tmp_path):
    with pytest.raises(UserError, match="unitree_g1/"):
        check_menagerie(MenagerieChoice(tmp_path, "playground"), ("unitree_g1",), G1)


def test_offline_without_assets_is_one_line_saying_how_to_provide_them(mjx_env, monkeypatch, tmp_path):
    monkeypatch.setattr(assets, "network_reachable", lambda *a, **k: False)
    monkeypatch.setattr(mjx_env, "ensure_menagerie_exists", lambda: pytest.fail("must not try to download offline"))
    with pytest.raises(UserError) as error:
        prepare_assets(EnvConfig(name=G1))
    message = str(error.value)
    assert "\n" not in message and ENV_VARIABLE in message and "env.menagerie_path" in message
    assert not (tmp_path / "playground_menagerie").exists()


def test_failed_download_is_one_line(mjx_env, monkeypatch):
    def failing_clone():
        raise subprocess.CalledProcessError(128, ["git", "clone"])

    monkeypatch.setattr(assets, "network_reachable", lambda *a, **k: True)
    monkeypatch.setattr(mjx_env, "ensure_menagerie_exists", failing_clone)
    with pytest.raises(UserError, match=f"downloading MuJoCo Menagerie for {G1} failed.*{ENV_VARIABLE}"):
        prepare_assets(EnvConfig(name=G1))


def test_cli_train_g1_offline_exits_2_with_one_line_and_writes_nothing(mjx_env, monkeypatch, tmp_path, capsys):
    from rlfit.cli import main

    monkeypatch.setattr(assets, "network_reachable", lambda *a, **k: False)
    run_dir = tmp_path / "run"
    code = main(["train", G1, "--preset", "smoke", "--run-dir", str(run_dir), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rlfit: error: ") and ENV_VARIABLE in err
    assert not run_dir.exists()
