"""rlfit: train robot control policies with PPO on MuJoCo Playground in JAX, sized to the hardware it finds."""

__version__ = "0.1.0"


def train(*args, **kwargs):
    """See `rlfit.api.train`."""
    from rlfit.api import train as _train

    return _train(*args, **kwargs)


__all__ = ["train", "__version__"]
