"""`rlfit play`: a saved policy in native MuJoCo (the C simulator), rendered headless to a video or shown live."""

from rlfit.deploy.play.session import PlayOptions, PlayResult, play

__all__ = ["PlayOptions", "PlayResult", "play"]
