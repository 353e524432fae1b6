"""Environment layer: load an environment (Playground or your own) and batch it with auto-reset."""

from rlfit.envs.loading import choose_impl, load_env
from rlfit.envs.vec_env import EnvState, StepOutput, VecEnv

__all__ = ["EnvState", "StepOutput", "VecEnv", "choose_impl", "load_env"]
