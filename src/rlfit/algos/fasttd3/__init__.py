"""FastTD3 (Seo et al. 2025, arXiv:2505.22642): TD3 (Fujimoto et al. 2018) with a distributional C51 critic, n-step
returns, many parallel environments and large batches, as pure JAX functions.

Modules: `config` (hyperparameters, presets), `distributional` (the categorical projection), `nstep` (n-step
windows read from the shared device replay buffer, `rlfit.algos.offpolicy`), `networks` (deterministic tanh
actor, twin distributional critics), `losses`, `update` (one critic update, a delayed actor update, the target
update), `step` (state and the compiled training step), `planning` (memory rules), `algorithm` (the contract).
"""
