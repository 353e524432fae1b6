"""rlfit: train robot control policies with PPO or SAC on MuJoCo Playground in JAX, sized to the hardware it finds."""

__version__ = "0.1.0"


def train(*args, **kwargs):
    """See `rlfit.api.train`."""
    from rlfit.api import train as _train

    return _train(*args, **kwargs)


def load_policy(*args, **kwargs):
    """See `rlfit.policy_io.load_policy`."""
    from rlfit.policy_io import load_policy as _load_policy

    return _load_policy(*args, **kwargs)


__all__ = ["load_policy", "train", "__version__"]
