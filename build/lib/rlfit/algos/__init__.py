"""The learning algorithms (PPO, SAC, FastTD3), one folder each (config, sizes, memory rules, networks, losses, step), each
behind the one contract in `rlfit.algos.contract` and registered by one line in `rlfit.algos.registry`."""
