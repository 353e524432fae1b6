"""`rlfit transfer-check`: the exported (ONNX) policy in native MuJoCo on the nominal and on randomized models."""

from rlfit.deploy.transfer.check import TransferCheckOptions, TransferRun, run_transfer_check
from rlfit.deploy.transfer.episodes import EpisodeRecord

__all__ = ["EpisodeRecord", "TransferCheckOptions", "TransferRun", "run_transfer_check"]
