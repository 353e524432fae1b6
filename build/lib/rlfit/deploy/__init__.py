"""Using a trained policy: the policy file, export (ONNX) and play (video or viewer)."""
