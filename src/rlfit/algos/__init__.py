"""Learning algorithms, one package each (config, networks, losses, step), behind `rlfit.algos.contract` and
listed in `rlfit.algos.registry`."""
