"""What a checkpoint costs: seconds to save and to load a training state, and the checksums' share of it.

    .venv/bin/python benchmarks/checkpoint_save.py                     # SAC quick, SAC pixels, PPO quick
    .venv/bin/python benchmarks/checkpoint_save.py --reps 5
    .venv/bin/python benchmarks/checkpoint_save.py --quick            # a check of the script (results/tmp/)

Each case builds the starting state of `rlfit train CartpoleBalance --algo A --preset P` (its replay buffer at
full capacity, all of it saved: the worst case, a buffer that has filled), then saves it `--reps` times
(`rlfit.checkpoints.format.save_checkpoint`, Orbax writing the shards, meta.json, the rename into place) and loads it as
many times (`load_checkpoint`, checksums verified). `checksum_s` times `rlfit.checkpoints.fingerprint.fingerprints` alone on
the same arrays (one pass over them where they live), which both a save and a load include. The first save of a
state's structure also compiles the checksum program: `first_save_s` shows it. Writes
results/checkpoint_save.json. `--quick` runs one case, PPO's smoke preset on the toy environment (tests/toy_env.py),
one rep, and writes results/tmp/checkpoint_save_quick.json.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import TOY_ENV, finish_record, print_table, start_record, toy_env_importable  # noqa: E402

ENV = "CartpoleBalance"
CASES = (("sac", "quick"), ("sac", "pixels"), ("ppo", "quick"))
QUICK_CASES = (("ppo", "smoke"),)
"""--quick: one small state on the toy environment (every step of a case, compiled in seconds)."""


def measure(env_name: str, algo: str, preset: str, reps: int) -> dict:
    import jax
    import numpy as np

    from rlfit.checkpoints.format import load_checkpoint, save_checkpoint
    from rlfit.config.schema import resolve
    from rlfit.checkpoints.fingerprint import fingerprints
    from rlfit.planning.device_plan import plan_for
    from rlfit.run.probes import StepProbes
    from rlfit.run.trainer import Trainer

    config = resolve(env_name, preset, overrides=[f"algo={algo}"])
    config, plan, env = plan_for(config, StepProbes())
    trainer = Trainer.build(config, plan, env=env)
    state = jax.block_until_ready(trainer.init_state())
    leaves = jax.tree.leaves(state)
    rows = [int(leaf.shape[0]) if leaf.ndim else 1 for leaf in leaves]
    meta = {"iteration": 1, "env_steps": 0, "progress": {}, "config": {}, "plan": {}, "versions": {}}
    folder = Path(tempfile.mkdtemp(prefix="checkpoint-save-"))
    try:
        started = time.perf_counter()
        save_checkpoint(folder, state, meta)
        first_save_s = time.perf_counter() - started
        saves, loads, checksums = [], [], []
        like = trainer.abstract_state()
        for _ in range(reps):
            started = time.perf_counter()
            save_checkpoint(folder, state, meta)
            saves.append(time.perf_counter() - started)
            started = time.perf_counter()
            jax.block_until_ready(load_checkpoint(folder, 1, like)[0])
            loads.append(time.perf_counter() - started)
            started = time.perf_counter()
            fingerprints(leaves, rows)
            checksums.append(time.perf_counter() - started)
        stored = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"algo": algo, "preset": preset, "state_bytes": int(sum(np.asarray(leaf).nbytes for leaf in leaves)),
            "stored_bytes": stored, "leaves": len(leaves), "first_save_s": round(first_save_s, 3),
            "save_s": round(statistics.median(saves), 3), "load_s": round(statistics.median(loads), 3),
            "checksum_s": round(statistics.median(checksums), 3), "save_times_s": [round(t, 3) for t in saves],
            "load_times_s": [round(t, 3) for t in loads]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="PPO smoke on the toy environment, one rep: a check "
                        "of the script (results/tmp/)")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default results/checkpoint_save.json)")
    args = parser.parse_args()
    record = start_record("checkpoint_save_quick" if args.quick else "checkpoint_save")
    if args.quick:
        toy_env_importable()
    env_name, cases = (TOY_ENV, QUICK_CASES) if args.quick else (ENV, CASES)
    record["env"] = env_name
    record["cases"] = [measure(env_name, algo, preset, 1 if args.quick else args.reps) for algo, preset in cases]
    print_table([(c["algo"], c["preset"], f"{c['state_bytes'] / 2**20:.1f}", f"{c['stored_bytes'] / 2**20:.1f}",
                  c["first_save_s"], c["save_s"], c["load_s"], c["checksum_s"]) for c in record["cases"]],
                ["algo", "preset", "state MiB", "on disk MiB", "first save s", "save s", "load s", "checksum s"])
    finish_record(record, args.out)


if __name__ == "__main__":
    main()
