"""`rlfit transfer-check`: the exported (ONNX) policy in native MuJoCo on the nominal and on randomized models.

Modules: `options` (what to check; pure Python), `check` (runs the episodes), `episodes`, `models`, `onnx_policy`.
This package imports none of them, so the command line reads `options` without JAX."""
