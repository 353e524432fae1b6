"""The library entry points: `rlfit.train(...)` for notebooks and scripts (the CLI calls the same).

The work is done in `rlfit.run.session`; this module only names what the package offers.
"""

from __future__ import annotations

from rlfit.run.loop import RunResult
from rlfit.run.session import train, train_config
from rlfit.rundir.layout import RunDir

__all__ = ["RunDir", "RunResult", "train", "train_config"]
