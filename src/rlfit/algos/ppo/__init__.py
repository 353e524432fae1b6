"""PPO in pure JAX: rollout, GAE, loss, and one compiled training iteration.

Modules: `config` (hyperparameters, presets), `networks` (the agent: policy and value networks), `rollout`, `gae`,
`losses`, `step` (state and the compiled training iteration), `sizes`, `candidates` and `planning` (memory rules),
`algorithm` (the contract).
"""
