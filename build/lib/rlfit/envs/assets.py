"""Robot assets (MuJoCo Menagerie) for Playground's locomotion and manipulation environments.

Playground reads every robot file through one module attribute, `mujoco_playground._src.mjx_env.MENAGERIE_PATH`
(looked up when an environment is built, not at import), and `git clone`s Menagerie into its own package
folder when that path is missing. rlfit points that attribute at the folder it finds, in this order:

    1. the config key `env.menagerie_path`
    2. the environment variable `RLFIT_MENAGERIE_PATH`
    3. Playground's own copy (`.../mujoco_playground/external_deps/mujoco_menagerie`), when it exists
    4. Playground's download (needs network); offline, a one-line UserError says how to provide the assets

Nothing is copied and nothing is written into site-packages (except by Playground's own download), so a real
Menagerie cloned later is used as before. The control suite needs no Menagerie; this is a no-op there.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from rlfit.config.schema import EnvConfig
from rlfit.errors import UserError

ENV_VARIABLE = "RLFIT_MENAGERIE_PATH"
MENAGERIE_URL = "https://github.com/google-deepmind/mujoco_menagerie"

# Playground sub-package -> the Menagerie folders its environments read (Playground 0.2).
ROBOT_FOLDERS: dict[str, tuple[str, ...]] = {
    "apollo": ("apptronik_apollo",),
    "barkour": ("google_barkour_vb",),
    "berkeley_humanoid": ("berkeley_humanoid",),
    "g1": ("unitree_g1",),
    "go1": ("unitree_go1",),
    "h1": ("unitree_h1",),
    "op3": ("robotis_op3",),
    "spot": ("boston_dynamics_spot",),
    "t1": ("booster_t1",),
    "aero_hand": ("tetheria_aero_hand_open",),
    "aloha": ("aloha",),
    "franka_emika_panda": ("franka_emika_panda",),
    "franka_emika_panda_robotiq": ("franka_emika_panda", "robotiq_2f85_v4"),
    "leap_hand": ("leap_hand",),
}


class MenagerieChoice(NamedTuple):
    """Where the Menagerie for a run comes from."""

    path: Path | None
    """The folder to use; None means Playground must download it."""
    origin: str
    """How it was found: 'env.menagerie_path', 'RLFIT_MENAGERIE_PATH', 'playground' or 'download'."""


def prepare_assets(config: EnvConfig) -> Path | None:
    """Makes the Menagerie folder `config.name` needs the one Playground reads; returns it (None: not needed)."""
    if ":" in config.name or not needs_menagerie(config.name):
        return None
    from mujoco_playground._src import mjx_env

    folders = robot_folders(config.name)
    choice = choose_menagerie(config.menagerie_path, os.environ, Path(str(mjx_env.MENAGERIE_PATH)))
    if choice.path is None:
        download_menagerie(config.name, folders)
        return Path(str(mjx_env.MENAGERIE_PATH))
    check_menagerie(choice, folders, config.name)
    point_playground_at(choice.path)
    return choice.path


def needs_menagerie(env_name: str) -> bool:
    """True for Playground's locomotion and manipulation environments (robots from Menagerie)."""
    from mujoco_playground._src import locomotion, manipulation

    return env_name in locomotion.ALL_ENVS or env_name in manipulation.ALL_ENVS


def robot_folders(env_name: str) -> tuple[str, ...]:
    """The Menagerie folders `env_name` reads, e.g. ('unitree_g1',); () when rlfit does not know them."""
    from mujoco_playground._src import locomotion, manipulation

    for suite in (locomotion, manipulation):
        env_class = getattr(suite, "_envs", {}).get(env_name)
        if env_class is not None:
            module = getattr(getattr(env_class, "func", env_class), "__module__", "")
            package = module.split(".")[-2] if module.count(".") >= 1 else ""
            return ROBOT_FOLDERS.get(package, ())
    return ()


def choose_menagerie(config_path: str, environ: Mapping[str, str], playground_path: Path) -> MenagerieChoice:
    """Applies the lookup order (config key, environment variable, Playground's copy, download); pure."""
    if config_path:
        return MenagerieChoice(Path(config_path).expanduser().resolve(), "env.menagerie_path")
    if environ.get(ENV_VARIABLE):
        return MenagerieChoice(Path(environ[ENV_VARIABLE]).expanduser().resolve(), ENV_VARIABLE)
    if playground_path.is_dir():
        return MenagerieChoice(playground_path, "playground")
    return MenagerieChoice(None, "download")


def check_menagerie(choice: MenagerieChoice, folders: tuple[str, ...], env_name: str) -> None:
    """Raises a one-line UserError unless `choice.path` is a folder holding each of `folders`."""
    path = choice.path
    assert path is not None
    fix = f"point {ENV_VARIABLE} or env.menagerie_path at a clone of {MENAGERIE_URL}"
    if not path.is_dir():
        raise UserError(f"the Menagerie folder {path} (from {choice.origin}) does not exist; {fix}")
    missing = [name for name in folders if not (path / name).is_dir()]
    if not missing:
        return
    if path.name in folders:
        raise UserError(f"{choice.origin} points at the robot folder {path}; point it at its parent "
                        f"{path.parent} (the Menagerie folder that holds {path.name}/)")
    if choice.origin == "playground":
        fix = f"delete {path} (an incomplete download?) so that Playground downloads it again, or {fix}"
    raise UserError(f"{env_name} needs {', '.join(m + '/' for m in missing)} in the Menagerie folder {path} "
                    f"(from {choice.origin}); {fix}")


def point_playground_at(path: Path) -> None:
    """Makes Playground read robot files from `path` (this process only; nothing is written)."""
    from etils import epath
    from mujoco_playground._src import mjx_env

    mjx_env.MENAGERIE_PATH = epath.Path(str(path))


def download_menagerie(env_name: str, folders: tuple[str, ...]) -> None:
    """Lets Playground clone Menagerie (with its progress bar); offline or on failure, a one-line UserError."""
    from mujoco_playground._src import mjx_env

    needed = f" ({', '.join(f + '/' for f in folders)})" if folders else ""
    how = (f"set {ENV_VARIABLE}=/path/to/mujoco_menagerie or --set env.menagerie_path=/path/to/mujoco_menagerie "
           f"(a clone of {MENAGERIE_URL})")
    if not network_reachable():
        raise UserError(f"{env_name} needs MuJoCo Menagerie's robot assets{needed}, which are not installed and "
                        f"cannot be downloaded without network; {how}")
    try:
        mjx_env.ensure_menagerie_exists()
    except (OSError, subprocess.CalledProcessError) as error:
        raise UserError(f"downloading MuJoCo Menagerie for {env_name} failed ({error}); {how}") from None


def network_reachable(host: str = "github.com", port: int = 443, timeout_s: float = 5.0) -> bool:
    """True when a TCP connection to `host` opens within `timeout_s` (the download's first requirement)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
