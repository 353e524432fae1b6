"""`rlfit train ENV`: train a policy."""

from __future__ import annotations

import argparse

from rlfit.cli.output import add_output_arguments, show_result, silent
from rlfit.config.algorithms import ALGORITHMS, DEFAULT_ALGORITHM, titles_in_words
from rlfit.config.schema import DEFAULT_ENV, preset_names


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The config layers every command that builds a config accepts."""
    parser.add_argument("--algo", choices=list(ALGORITHMS),
                        help=f"the learning algorithm (sets algo; default: {DEFAULT_ALGORITHM})")
    parser.add_argument("--preset", default=None, metavar="NAME",
                        help=f"one of {', '.join(preset_names())} (default: the config file's, else chosen for the "
                             f"device: quick on a CPU, default on a GPU){preset_owners()}")
    parser.add_argument("--config", metavar="FILE",
                        help=f"YAML file with algo and sections env, the algorithm's ({', '.join(ALGORITHMS)}), "
                             "network, run")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                        help="override one key, e.g. --set ppo.learning_rate=3e-4 (repeatable)")


def preset_owners() -> str:
    """'; g1: PPO, FastTD3 only; ...' for each preset that not every registered algorithm has ('' if none)."""
    from rlfit.config.algorithms import config_module, title

    owners = {name: [title(algo) for algo in ALGORITHMS if name in config_module(algo).PRESETS]
              for name in preset_names()}
    partial = [f"{name}: {', '.join(titles)} only" for name, titles in owners.items() if len(titles) < len(ALGORITHMS)]
    return "".join(f"; {text}" for text in partial)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train", help="train a policy",
        description=f"Train a policy on ENV with {titles_in_words()} (--algo; default: {DEFAULT_ALGORITHM}).")
    parser.add_argument("env", nargs="?", default=DEFAULT_ENV, metavar="ENV",
                        help=f"Playground environment name or module:factory (default: {DEFAULT_ENV})")
    add_config_arguments(parser)
    parser.add_argument("--num-envs", metavar="N",
                        help="parallel environments (overrides the algorithm's num_envs); 'auto': size the run to the device's "
                             "memory (PPO: the most environments that fit; SAC, FastTD3: the largest replay buffer)")
    parser.add_argument("--device-memory", metavar="SIZE",
                        help="with --num-envs auto: plan for this much device memory (e.g. 12GiB), not all of it")
    parser.add_argument("--timesteps", metavar="N", help="total env steps (overrides run.num_timesteps)")
    parser.add_argument("--seed", metavar="S", help="random seed (overrides run.seed)")
    parser.add_argument("--run-dir", metavar="DIR", help="where to write the run (default: runs/<env>-<time>)")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue RUN_DIR instead of starting a new run (refused if the settings differ)")
    add_output_arguments(parser)
    add_distributed_arguments(parser)
    parser.set_defaults(handler=run)


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags that join this process to a run over several processes or machines (`rlfit.parallel.distributed`)."""
    group = parser.add_argument_group("several machines (jax.distributed)")
    group.add_argument("--distributed", action="store_true",
                       help="this process is one of several training one run (under SLURM or Open MPI JAX finds "
                            "the others; else give the three flags below)")
    group.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address, the same for every process")
    group.add_argument("--num-processes", type=int, metavar="N", help="how many processes train the run")
    group.add_argument("--process-id", type=int, metavar="I", help="this process's number, 0 to N-1 (0 writes)")


def join_if_distributed(args: argparse.Namespace) -> None:
    """Joins the distributed run when --distributed is given (before anything uses JAX)."""
    given = [args.coordinator, args.num_processes, args.process_id]
    if not args.distributed:
        if any(value is not None for value in given):
            from rlfit.errors import UserError

            raise UserError("--coordinator, --num-processes and --process-id need --distributed")
        return
    from rlfit.parallel.distributed import initialize

    initialize(*given)


def chosen_algo(args: argparse.Namespace) -> str:
    """--algo, else the last `--set algo=...`, else the config file's `algo`, else the default."""
    from rlfit.config.algorithms import DEFAULT_ALGORITHM
    from rlfit.config.schema import parse_override, read_yaml

    if getattr(args, "algo", None):
        return args.algo
    for item in reversed(args.overrides):
        key, value = parse_override(item)
        if key == "algo":
            return str(value)
    if getattr(args, "config", None):
        return str(read_yaml(args.config).get("algo", DEFAULT_ALGORITHM))
    return DEFAULT_ALGORITHM


def flag_overrides(args: argparse.Namespace) -> list[str]:
    """The shortcut flags as `--set` items, applied after the explicit ones."""
    items = list(args.overrides)
    algo = chosen_algo(args)
    if getattr(args, "algo", None):
        items.append(f"algo={args.algo}")
    for flag, key in (("num_envs", f"{algo}.num_envs"), ("timesteps", "run.num_timesteps"), ("seed", "run.seed")):
        value = getattr(args, flag, None)
        if flag == "num_envs" and num_envs_auto(args):
            continue
        if value is not None:
            items.append(f"{key}={value}")
    if getattr(args, "num_envs", None) is not None and not num_envs_auto(args):
        items.append("run.fit_to_device=false")  # an explicit --num-envs N wins over a preset's fitting
    return items


def num_envs_auto(args: argparse.Namespace) -> bool:
    """True for `--num-envs auto` (the planner chooses the sizes)."""
    return str(getattr(args, "num_envs", None)).strip().lower() == "auto"


def run(args: argparse.Namespace) -> int:
    from rlfit.api import train
    from rlfit.hardware.units import parse_size

    join_if_distributed(args)
    if args.resume:
        return resume_as_train(args)
    device_memory = parse_size(args.device_memory) if args.device_memory is not None else None
    result = train(args.env, args.preset, args.config, flag_overrides(args), run_dir=args.run_dir,
                   quiet=silent(args), num_envs_auto=num_envs_auto(args), device_memory=device_memory)
    show_run_result(args, result)
    return 0


def show_run_result(args: argparse.Namespace, result) -> None:
    """Under --json: {"run_dir": ..., "summary": summary.json's content}; else nothing (the console has said it)."""
    show_result(args, None, {"run_dir": result.run_dir.path, "summary": result.summary})


def resume_as_train(args: argparse.Namespace) -> int:
    """`rlfit train ENV ... --resume RUN_DIR`: resume, insisting that ENV and the settings match the run's."""
    from rlfit.config.schema import resolve
    from rlfit.errors import UserError
    from rlfit.run.resume import resume

    if num_envs_auto(args) or args.device_memory or args.run_dir:
        raise UserError("--resume continues a run with its own sizes and directory; "
                        "drop --num-envs auto, --device-memory and --run-dir")
    from rlfit.run.session import preset_for_device

    preset = preset_for_device(args.env, args.preset, args.config, flag_overrides(args)).name
    requested = resolve(args.env, preset, args.config, flag_overrides(args))
    show_run_result(args, resume(args.resume, timesteps=requested.run.num_timesteps, requested=requested,
                                 quiet=silent(args)))
    return 0
