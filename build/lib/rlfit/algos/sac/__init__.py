"""Soft Actor-Critic (Haarnoja et al. 2018, arXiv:1812.05905) as pure JAX functions, following Brax's `sac`.

Modules: `config` (hyperparameters), `replay` (device ring buffer), `networks` (tanh-Gaussian policy, twin Q),
`losses` (alpha, critic, actor), `step` (state, prefill and the compiled training step).
"""
