"""Learning algorithms other than PPO, one folder each (config, networks, losses, step)."""
