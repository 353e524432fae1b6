"""The learning algorithms (PPO, SAC, FastTD3), one folder each with the same file names where the role exists
(config, networks, losses, step, update, planning, algorithm), each behind the one contract in
`rlfit.algos.contract` and registered by one line in `rlfit.algos.registry`. What two algorithms share lives in
`offpolicy` (SAC and FastTD3) or `common` (all); no algorithm imports another."""
