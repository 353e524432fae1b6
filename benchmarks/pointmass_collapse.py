"""The quick preset on one environment, per seed, with the eval reward and value-loss curves: the issue-44 check
that PPO does not learn and then collapse (final eval >= 0.8 of the run's own best).

Each run is `rlfit train ENV --preset quick --seed S [--set ...]` as a user types it, labelled (`--label`), and
optionally with another checkout's sources first on PYTHONPATH (`--source DIR/src`, e.g. the code before a change).
Resumable: a (label, env, seed) already in the JSON is skipped, and the JSON is rewritten after every run.

    .venv/bin/python benchmarks/pointmass_collapse.py --label brax --seeds 0            # the current default
    .venv/bin/python benchmarks/pointmass_collapse.py --label before --source /tmp/old/src --seeds 0
    .venv/bin/python benchmarks/pointmass_collapse.py --label brax --env CartpoleBalance --seeds 0
    .venv/bin/python benchmarks/pointmass_collapse.py --label cached_reset --cached-reset --seeds 0 1 2

`--cached-reset` and `--staggered-starts` train through reset_variant_train.py (an experiment, not an rlfit
option): each training environment restarts from its first state, as Playground's Brax wrapper does, instead of
rlfit's fresh reset; or the training environments' first episodes start at random step counts, so that their
episodes do not all end in the same iteration.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import (BENCH_DIR, REPO, RESULTS, RLFIT, TMP, TOY_ENV, fresh_cache_env, git_state, load_1min, machine,
                    quick_cache, run_timed, toy_env_importable)

COLLAPSE_RATIO = 0.8
QUICK_SET = ("ppo.num_envs=8", "ppo.batch_size=8", "ppo.num_minibatches=2", "ppo.unroll_length=4",
             "ppo.num_updates_per_batch=1", "ppo.advantages=brax", "ppo.policy_hidden=[32,32]",
             "ppo.value_hidden=[32,32]", "run.num_eval_envs=4", "env.episode_length=100", "run.num_timesteps=128",
             "run.eval_every=1")
"""--quick's overrides of the quick preset: the smoke preset's sizes, networks and estimator, 2 iterations of
8 * 2 * 4 = 64 env steps, each evaluated: the programs of quickstart.py's check, which it compiled into the cache the
test session's checks share (`quick_cache`); its own sizes (32 environments, 1280 env steps an iteration) compiled
them again, 1.5-2 CPU seconds."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="PointMass")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--label", help="names the code or settings measured, e.g. before, brax (required to train)")
    parser.add_argument("--source", type=Path, default=REPO / "src",
                        help="the src/ directory to import rlfit from (default this checkout's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed on to rlfit train")
    variants = parser.add_mutually_exclusive_group()
    variants.add_argument("--cached-reset", action="store_true",
                          help="training environments restart from their first state (reset_variant_train.py)")
    variants.add_argument("--staggered-starts", action="store_true",
                          help="training environments' first episodes start at random step counts")
    parser.add_argument("--out", type=Path, default=RESULTS / "pointmass_collapse.json")
    parser.add_argument("--report", action="store_true",
                        help="print the runs in the JSON as Markdown (per run: final, best, curves) and stop")
    parser.add_argument("--quick", action="store_true", help="the toy environment (tests/toy_env.py), 2 iterations, "
                        "seed 0, a fresh JSON: a check of the script (results/tmp/)")
    args = parser.parse_args()
    if args.quick:  # every step of a run, its programs compiled in a second or two
        args.env, args.seeds, args.label, args.out = TOY_ENV, [0], "quick", TMP / "pointmass_collapse_quick.json"
        args.set = [*args.set, *QUICK_SET]
        args.out.unlink(missing_ok=True)
        toy_env_importable()
    if not args.report and not args.label:
        parser.exit(2, "pointmass_collapse.py: error: --label is required to train (or pass --report)\n")
    if not (args.source / "rlfit" / "__init__.py").exists():
        parser.exit(2, f"--source {args.source} has no rlfit package; pass a checkout's src directory\n")
    return args


def curves(metrics_path: Path) -> dict[str, list]:
    """Per iteration: eval rewards [[iteration, reward]]; value loss, gradient norm and approximate KL of the
    iteration's updates [[iteration, value]]; episodes that ended in the iteration, where any did."""
    from rlfit.sinks.jsonl import read_rows

    out: dict[str, list] = {"eval_reward": [], "value_loss": [], "grad_norm": [], "approx_kl": [],
                            "episodes_ended": []}
    for row in read_rows(metrics_path):
        if row.get("kind") == "eval":
            out["eval_reward"].append([row["iteration"], round(row["eval/episode_reward"], 2)])
        elif row.get("kind") == "train" and "loss/value" in row:
            out["value_loss"].append([row["iteration"], round(row["loss/value"], 4)])
            out["grad_norm"].append([row["iteration"], round(row["grad_norm"], 3)])
            out["approx_kl"].append([row["iteration"], round(row["loss/approx_kl"], 4)])
            if row.get("episodes"):
                out["episodes_ended"].append([row["iteration"], row["episodes"]])
    return out


def run_one(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    TMP.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"collapse-{args.label}-{args.env}-{seed}-", dir=TMP))
    variant = "cached" if args.cached_reset else "staggered" if args.staggered_starts else None
    program = [sys.executable, str(BENCH_DIR / "reset_variant_train.py"), variant] if variant else [str(RLFIT)]
    argv = [*program, "train", args.env, "--preset", "quick", "--seed", str(seed), "--run-dir", str(work / "run")]
    argv += [arg for item in args.set for arg in ("--set", item)]
    env = fresh_cache_env(quick_cache(work / "cache", args.quick))
    env["PYTHONPATH"] = os.pathsep.join([str(args.source.resolve()), env.get("PYTHONPATH", "")])
    load_before = load_1min()
    timed = run_timed(argv, env=env, log=work / "stdout.log")
    result: dict[str, Any] = {"label": args.label, "env": args.env, "seed": seed, "set": args.set,
                              "cached_reset": args.cached_reset, "staggered_starts": args.staggered_starts,
                              "source": str(args.source),
                              "command": f"rlfit train {args.env} --preset quick --seed {seed}"
                                         + "".join(f" --set {item}" for item in args.set),
                              "exit_code": timed["exit_code"], "wall_s": timed["wall_s"],
                              "loadavg_1min_before": load_before, "date": machine()["date"]}
    summary_path = work / "run" / "summary.json"
    if timed["exit_code"] != 0 or not summary_path.exists():
        result["error"] = f"see {work / 'stdout.log'}"
        return result
    summary = json.loads(summary_path.read_text())
    final, best = summary["final_eval_reward"], summary["best_eval_reward"]
    result.update({"final_eval_reward": final, "best_eval_reward": best, "params_digest": summary.get("params_digest"),
                   "final_over_best": round(final / best, 3) if best else None,
                   "collapsed": bool(best and final < COLLAPSE_RATIO * best), **curves(work / "run" / "metrics.jsonl")})
    return result


def report(record: dict[str, Any]) -> str:
    """Markdown: one row per run (final, best, their ratio, the value loss before and after the best eval), then
    each run's eval curve with the value loss of the eval's iteration (iteration: reward / value loss)."""
    rows = ["| label | env | seed | final | best (iteration) | final / best | value loss up to the best | after it |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    curves_md = []
    for key, run in record["runs"].items():
        if "eval_reward" not in run:
            rows.append(f"| {run['label']} | {run['env']} | {run['seed']} | {run.get('error', '-')} | | | | |")
            continue
        best_iteration = max(run["eval_reward"], key=lambda point: point[1])[0]
        before = [v for i, v in run["value_loss"] if i <= best_iteration]
        after = [v for i, v in run["value_loss"] if i > best_iteration]
        rows.append(f"| {run['label']} | {run['env']} | {run['seed']} | {run['final_eval_reward']:.1f} | "
                    f"{run['best_eval_reward']:.1f} ({best_iteration}) | {run['final_over_best']:.3f} | "
                    f"{_span(before)} | {_span(after)} |")
        value_loss = dict(run["value_loss"])
        curves_md.append(f"- {key}: " + ", ".join(f"{i}: {r:.0f} / {value_loss.get(i, float('nan')):.0f}"
                                                 for i, r in run["eval_reward"]))
    return "\n".join(rows + [""] + curves_md)


def _span(values: list[float]) -> str:
    return f"{min(values):.2g}-{max(values):.3g}" if values else "-"


def main() -> None:
    args = parse_args()
    if args.report:
        print(report(json.loads(args.out.read_text())))
        return
    record = json.loads(args.out.read_text()) if args.out.exists() else {"benchmark": "pointmass_collapse", "runs": {}}
    for seed in args.seeds:
        key = f"{args.label}/{args.env}/{seed}"
        if key in record["runs"]:
            print(f"{key}: already measured, skipped", flush=True)
            continue
        print(f"{key}: training ...", flush=True)
        result = run_one(args, seed)
        result["git"] = git_state()
        record["runs"][key] = result
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {os.path.relpath(args.out, REPO)}", flush=True)
        print(f"{key}: final {result.get('final_eval_reward')} best {result.get('best_eval_reward')} "
              f"({result['wall_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
