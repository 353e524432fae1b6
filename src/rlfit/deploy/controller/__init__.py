"""The robot-side control loop, without JAX (numpy, mujoco, onnxruntime, pyyaml): the file to port to a robot's SDK.

`rlfit.deploy.controller.loop.Controller` reads a deployment bundle and runs what a robot's loop runs: read the
sensors, build the observation, run the ONNX policy, turn its action into motor commands (target, kp, kd), and let
the motors' PD act at sim_dt until the next control step. Nothing here may import JAX (a test checks it).
"""
