"""What the off-policy algorithms (SAC, FastTD3) share: the device replay buffer (`replay`), its sizes and
back-off (`sizes`), the memory planner's rules for it (`memory_rules`), collecting into it and its prefill
(`collect`), the common parts of a fresh state (`state`), the Learner functions that resize, refill, checkpoint
and split it (`learner`), and twin critics with their soft target update (`critics`).

They read an algorithm's state and config section through two small Protocols (`types`) that `SACState` and
`FastTD3State`, `SACConfig` and `FastTD3Config` satisfy; no module here imports an algorithm.
"""
