"""PPO in pure JAX: rollout, GAE, loss, and one compiled training iteration.

Modules: `config` (hyperparameters, presets), `networks` (the agent: policy and value networks), `rollout`, `gae`,
`losses`, `step` (state and the compiled training iteration), `sizes`, `candidates` and `planning` (memory rules),
`algorithm` (the contract).
"""

from rlfit.algos.ppo.gae import compute_gae
from rlfit.algos.ppo.step import IterationMetrics, TrainState, init_train_state, make_train_iteration
from rlfit.algos.ppo.losses import LossTerms, ppo_loss

__all__ = ["IterationMetrics", "LossTerms", "TrainState", "compute_gae", "init_train_state",
           "make_train_iteration", "ppo_loss"]
