#!/usr/bin/env bash
# Readies a bare CUDA machine that has JAX but not MuJoCo/Playground (the device tool's H100/H200) for the
# GPU runbook in benchmarks/README.md.
#
#   bash benchmarks/device_setup.sh fetch     # here: cp312 x86-64 wheels into .whl/, the G1 assets into .assets/
#   source benchmarks/device_setup.sh install # there, first in every command (carry .whl and .assets)
#
# `install` puts the wheels in /tmp/site, puts src/ on PYTHONPATH, and writes .venv/bin/python and
# .venv/bin/rlfit as wrappers of the machine's python3, so the scripts run as written in the README.
WHEELS=(mujoco==4.0.1 mujoco-core==4.0.1 mujoco-mjx==3.17.0 playground==0.2.0 brax==0.14.2 trimesh mediapy
        ml-collections==1.1.0 tensorboardX==2.6.5 jaxopt==0.8.5 glfw pyopengl)
case "${1:-}" in
  fetch)
    set -euo pipefail
    rm -rf .whl && mkdir -p .git/info && touch .git/info/exclude
    grep -qx '/.whl/' .git/info/exclude || echo '/.whl/' >> .git/info/exclude
    grep -qx '/.assets/' .git/info/exclude || echo '/.assets/' >> .git/info/exclude
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${WHEELS[@]}"
    if [ -d ../shared/assets/mujoco_menagerie/unitree_g1 ]; then
      mkdir -p .assets/mujoco_menagerie && cp -r ../shared/assets/mujoco_menagerie/unitree_g1 .assets/mujoco_menagerie/
    fi
    du -sh .whl .assets 2>/dev/null || true ;;
  install)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      || { echo 'device_setup: the wheels did not install (run fetch here first, carry .whl)' >&2; return 1 2>/dev/null || exit 1; }
    export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1 RLFIT_MENAGERIE_PATH="$PWD/.assets/mujoco_menagerie"
    mkdir -p .venv/bin
    printf '#!/bin/sh\nexec python3 "$@"\n' > .venv/bin/python
    printf '#!/bin/sh\nexec python3 -m rlfit "$@"\n' > .venv/bin/rlfit
    chmod +x .venv/bin/python .venv/bin/rlfit ;;
  *) echo "usage: bash benchmarks/device_setup.sh fetch | source benchmarks/device_setup.sh install" >&2; return 2 2>/dev/null || exit 2 ;;
esac
