"""rlfit: train robot control policies with PPO, SAC or FastTD3 on MuJoCo Playground in JAX, sized to the hardware it finds."""

from rlfit.hardware import warp_import as _warp_import
from rlfit.versions import __version__

_warp_import.install()  # MJX skips NVIDIA Warp where it cannot run (a CPU-only JAX): seconds off every start


def train(*args, **kwargs):
    """See `rlfit.api.train`."""
    from rlfit.api import train as _train

    return _train(*args, **kwargs)


def load_policy(*args, **kwargs):
    """See `rlfit.deploy.policy_file.load_policy`."""
    from rlfit.deploy.policy_file import load_policy as _load_policy

    return _load_policy(*args, **kwargs)


__all__ = ["load_policy", "train", "__version__"]
