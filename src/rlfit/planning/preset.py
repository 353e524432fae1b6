"""The preset a run takes when none is named (no `--preset`, no `preset:` in the config file): chosen for the
device rlfit finds, as the guides rlfit comes from choose their configs by the GPU they detect.

    choose_preset(named, presets, backend) -> PresetChoice(name, reason, by_device)

On a CPU the `quick` tier: Playground's published settings are made for a GPU (thousands of environments, 16
epochs of 32 minibatches per iteration), and on 2 CPU cores one of their iterations takes minutes (CartpoleBalance:
about 4,500 env steps/s against about 110,000 for quick at its former 4 epochs; benchmarks/README.md). On a GPU or
TPU, whatever its size, Playground's published settings (`default`), kept where the planner predicts that they fit the
device's memory and otherwise sized down by it to the most that fits (`rlfit.planning.device_plan.plan_for`'s
`shrink_to_fit`), so a 12 GB card runs the same recipe with fewer environments instead of failing. A named preset
always wins.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

CPU_PRESET = "quick"
"""The preset for a CPU when none is named."""
ACCELERATOR_PRESET = "default"
"""The preset for a GPU or TPU when none is named: Playground's published settings."""


class PresetChoice(NamedTuple):
    """Which preset a run uses, and why (one line for the console, plan.json and summary.json)."""

    name: str
    reason: str
    by_device: bool
    """True when rlfit chose it for the device (no preset was named)."""


def choose_preset(named: str | None, presets: Collection[str], backend: str) -> PresetChoice:
    """The preset for a run: `named` when given, else the one for `backend` ('cpu', 'gpu', 'tpu'), among `presets`
    (the algorithm's); `default` where the algorithm has no CPU tier."""
    if named is not None:
        return PresetChoice(named, f"preset {named}: named", False)
    if backend == "cpu" and CPU_PRESET in presets:
        return PresetChoice(CPU_PRESET, f"preset {CPU_PRESET}: no preset named and this device is a CPU, where "
                            "Playground's published (GPU) settings would take hours; --preset default runs them", True)
    device = "CPU" if backend == "cpu" else backend.upper()
    return PresetChoice(ACCELERATOR_PRESET, f"preset {ACCELERATOR_PRESET}: no preset named, so Playground's published "
                        f"settings for a {device}, sized down by the planner only where they do not fit its memory",
                        True)
