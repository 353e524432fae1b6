"""Robot assets (MuJoCo Menagerie) for Playground's locomotion and manipulation environments."""

from __future__ import annotations

from rlfit.config import EnvConfig


def prepare_assets(config: EnvConfig) -> None:
    """Makes sure the assets `config.name` needs are where Playground looks; no-op for the control suite."""
    return None
