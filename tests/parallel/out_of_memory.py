"""`rlfit` whose training programs run out of memory above 32 environments: `Trainer.compile` raises
RESOURCE_EXHAUSTED there (injected, as a program too large for every device would), so a run of more environments
backs off to 32 (tests/parallel/test_distributed.py).

    python -m tests.parallel.out_of_memory train ...   (the CLI, as `python -m rlfit`)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MOST_ENVS = 32


def running_out_above_most_envs(real_compile: Callable[..., Any]) -> Callable[..., Any]:
    """`Trainer.compile` that raises RESOURCE_EXHAUSTED above MOST_ENVS environments and else compiles."""
    import jax

    def compile_or_run_out(self, *args, **kwargs):
        if self.plan.sizes.num_envs > MOST_ENVS:
            raise jax.errors.JaxRuntimeError(f"RESOURCE_EXHAUSTED: injected at num_envs={self.plan.sizes.num_envs}")
        return real_compile(self, *args, **kwargs)

    return compile_or_run_out


if __name__ == "__main__":
    from rlfit.cli.gc_thresholds import collect_less_often

    collect_less_often()  # as `rlfit.cli.run` does
    from rlfit.cli import main
    from rlfit.run.trainer import Trainer

    Trainer.compile = running_out_above_most_envs(Trainer.compile)
    raise SystemExit(main())
