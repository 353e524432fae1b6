"""`rlfit sim2sim RUN_DIR`: the robot-side controller (`rlfit.deploy.controller`) in native MuJoCo on the nominal and
on randomized models, scored by the environment's own reward and termination; `--sweep` adds the sim-to-real
margin table."""
