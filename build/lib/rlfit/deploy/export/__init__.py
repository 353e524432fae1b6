"""`rlfit export`: the saved policy in a deployment format (ONNX), checked against `rlfit.load_policy`."""

FORMATS = ("onnx",)

__all__ = ["FORMATS"]
