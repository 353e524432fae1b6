"""Soft Actor-Critic (Haarnoja et al. 2018, arXiv:1812.05905) as pure JAX functions, following Brax's `sac`.

Modules: `config` (hyperparameters, presets), `networks` (tanh-Gaussian policy, twin Q), `losses` (alpha, critic,
actor), `update` (one gradient update), `step` (state and the compiled training step), `augment` (DrQ's image
shifts), `planning` (memory rules), `algorithm` (the contract). The replay buffer, its sizes, collecting and the
prefill are shared with FastTD3 (`rlfit.algos.offpolicy`).
"""
