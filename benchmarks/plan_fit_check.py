"""The planner's lines from its probes against the line it used before and against XLA at the exact sizes.

For each environment of `results/memory_prediction_cpu.json` (its overrides), the planner's models are fitted now
(`rlfit.planning.measure.fit_memory_model`) from both sets of probes: a CPU target's (the cap's candidate and 3/8
of it) and an accelerator's (384 and 3072 environments). Each is compared, at each size that file measured, with
XLA's analysis at that exact size (`xla_exact_bytes`, recorded there) and with the line used before
(`line_bytes`, fitted at 256 and 2048 environments). Then the lines choose: `num_envs` for GPU targets of 8 to
141 GiB (`--device-memory`, x1.5 margin; the accelerator's probes) and CPU targets of 2 to 64 GiB, 64 cores (the
CPU's probes). Same choice = the new fit changes no decision there.

    .venv/bin/python benchmarks/plan_fit_check.py
    .venv/bin/python benchmarks/plan_fit_check.py --quick    # the toy environment's lines: a check of the script
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import TOY_ENV, REPO, RESULTS, finish_record, print_table, start_record  # noqa: E402
from memory_prediction import overrides_for  # noqa: E402

GIB = 1 << 30
GPU_BUDGETS_GIB = (8, 12, 16, 24, 40, 80, 141)
CPU_BUDGETS_GIB = (2, 4, 8, 16, 64)
QUICK_ENV = TOY_ENV
"""--quick fits this environment's lines (the tests' point-reaching one, no physics: its probes compile in seconds)
with memory_prediction.py --quick's overrides (its CPU probes are that check's, read from a shared compile cache),
and compares them with the first environment's figures: the code runs, the errors it prints mean nothing."""


def choices(config, models, old_model) -> list[dict]:
    from rlfit.hardware.probe import cpu_info
    from rlfit.hardware.xla_memory import read_xla_memory_settings
    from rlfit.planning.budget import stated_budget
    from rlfit.planning.fit import memory_plan_from_model

    cpu = cpu_info("cpu", "check", read_xla_memory_settings({}), [])
    rows = []
    for target, budgets in (("gpu", GPU_BUDGETS_GIB), ("cpu", CPU_BUDGETS_GIB)):
        for gib in budgets:
            budget = stated_budget(gib * GIB, target, cpu)
            new, old = (memory_plan_from_model(config, m, budget, cpu_cores=64).chosen
                        for m in (models[target], old_model))
            rows.append({"target": target, "device_gib": gib, "new": new and new.sizes.num_envs,
                         "before": old and old.sizes.num_envs})
    return rows


def main() -> None:
    import jax

    from rlfit.config.schema import resolve
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning.memory_model import MemoryModel
    from rlfit.planning.measure import fit_memory_model
    from rlfit.run.probes import StepProbes

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the toy environment's lines against the first "
                        "environment's figures: a check of the script (results/tmp/)")
    quick = parser.parse_args().quick
    if quick:
        sys.path.insert(0, str(REPO))  # for tests.toy_env
    configure_jax("fp32")
    before = json.loads((RESULTS / "memory_prediction_cpu.json").read_text())
    record = start_record("plan_fit_check_quick" if quick else "plan_fit_check")
    record["compared_with"] = {"file": "benchmarks/results/memory_prediction_cpu.json", "git": before["git"]}
    record["results"] = []
    for result in before["results"][:1] if quick else before["results"]:
        env_name = QUICK_ENV if quick else result["env"]
        overrides = overrides_for(QUICK_ENV) if quick else result["overrides"]
        config = resolve(env_name, "smoke", overrides=list(overrides))  # as memory_prediction.py
        models = {target: fit_memory_model(config, StepProbes(), target_backend=target) for target in ("cpu", "gpu")}
        old = result["model"]
        old_model = MemoryModel(old["intercept_bytes"], old["bytes_per_env"], 0.0, (), jax.default_backend())
        rows = [{"num_envs": r["num_envs"], "xla_exact_bytes": r["xla_exact_bytes"], "line_before": r["line_bytes"],
                 "before_vs_xla": round(r["line_bytes"] / r["xla_exact_bytes"] - 1, 4),
                 **{f"line_now_{target}_probes": models[target].estimate(r["num_envs"]) for target in models},
                 **{f"now_{target}_probes_vs_xla": round(models[target].estimate(r["num_envs"]) /
                                                         r["xla_exact_bytes"] - 1, 4) for target in models}}
                for r in result["rows"]]
        picked = choices(config, models, old_model)
        record["results"].append({"env": env_name, "models": {t: m.to_dict() for t, m in models.items()},
                                  "rows": rows, "choices": picked,
                                  "same_choices": sum(c["new"] == c["before"] for c in picked),
                                  "choices_compared": len(picked)})
        print_table([[env_name, r["num_envs"], r["xla_exact_bytes"], r["before_vs_xla"],
                      r["now_cpu_probes_vs_xla"], r["now_gpu_probes_vs_xla"]] for r in rows],
                    ["env", "num_envs", "XLA exact", "before err", "CPU probes err", "accelerator probes err"])
        print([f"{t}: {[p.sizes.num_envs for p in m.points]}" for t, m in models.items()])
        print_table([[c["target"], c["device_gib"], c["before"], c["new"]] for c in picked],
                    ["target", "GiB", "chosen before", "chosen now"])
    finish_record(record, None if quick else RESULTS / "plan_fit_check.json")


if __name__ == "__main__":
    main()
