"""`python -m hpml_lab`: train one run from flags (every RunConfig field is a flag); torchrun starts one per
rank.

    python -m hpml_lab --epochs 2 --batch-size 64 --subset 2048 --save-model model.pt
    python -m hpml_lab --help        # every RunConfig field is a flag
    torchrun --standalone --nproc-per-node=2 -m hpml_lab --epochs 2 --batch-size 64

Bad flags or settings: one line on stderr, exit status 2, before any compute. The training itself is
hpml_lab.training.train; `hpml-lab` (hpml_lab.report.cli) is the command for tasks and reports.
"""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Mapping
from typing import Any

import torch

from hpml_lab import distributed, results
from hpml_lab.cliargs import OneLineParser, one_line
from hpml_lab.config import ConfigError, RunConfig, check_keys, coerce_value
from hpml_lab.data import DatasetError
from hpml_lab.device import is_oom, resolve_device
from hpml_lab.training import train


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per RunConfig field, as --batch-size and --batch_size; values parsed by RunConfig."""
    hints = typing.get_type_hints(RunConfig)
    defaults = RunConfig()
    for name in RunConfig.field_names():
        kind = hints[name].__name__
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            *([f"--{name}"] if "_" in name else []),
            dest=name,
            metavar=kind.upper(),
            default=argparse.SUPPRESS,
            help=f"{kind}, default {getattr(defaults, name)!r}",
        )


def config_from_args(ns: argparse.Namespace, extra: Mapping[str, Any] | None = None) -> RunConfig:
    """The RunConfig the parsed flags (and `extra`) give; from_dict refuses unknown keys and converts the
    strings."""
    params = {k: v for k, v in vars(ns).items() if k in RunConfig.field_names()}
    return RunConfig.from_dict({**params, **(extra or {})}, coerce=True)


def _complete_already(cfg: RunConfig) -> bool:
    """The run folder this process (or, under torchrun, its world) would fill holds a complete run of the
    same settings and data. Under DDP rank 0, which writes the results, decides for every rank (the others
    may not see its folder, or see it mid-write), so no rank trains while the rest have left."""
    from .sweeps import same_run

    env = distributed.read_env()
    run_dir = distributed.run_config(cfg, env.world_size).run_dir()
    done = results.is_complete(run_dir) and same_run(cfg, run_dir)
    if env.distributed:
        distributed.setup(resolve_device(cfg.device))
        mine = torch.tensor([1.0 if done and env.is_main else 0.0])
        done = bool(distributed.all_reduce_sum(mine).item() > 0)  # rank 0's answer, on every rank
        if done:
            distributed.cleanup()
    if done and env.is_main:
        print(f"complete already: {run_dir} (--if-missing: not run again)", flush=True)
    return done


def main(argv: list[str] | None = None) -> int:
    """`python -m hpml_lab`: one run from flags; under torchrun each rank runs this."""
    return distributed.leave(_main(argv))


def build_parser() -> argparse.ArgumentParser:
    """The flags of `python -m hpml_lab` (also read by tests/unit/test_docs_commands.py to check the docs'
    commands)."""
    parser = OneLineParser(prog="python -m hpml_lab", description="Train one run; see RunConfig.")
    add_config_flags(parser)
    parser.add_argument("--save-model", metavar="PATH", help="write the final weights (state_dict) here")
    parser.add_argument(
        "--if-missing",
        metavar="BOOL",
        default="false",
        help="true: do nothing when this run's folder already holds a complete run of the same "
        "settings and data (a resubmitted job goes straight on)",
    )
    return parser


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    try:
        if unknown:
            bad = unknown[0].lstrip("-").replace("-", "_").split("=")[0]
            check_keys({bad: None})
            raise ConfigError(f"could not parse {' '.join(unknown)!r}; flags take a value: --name VALUE")
        cfg = config_from_args(args)
        if args.save_model is not None and not args.save_model.strip():
            raise ConfigError("--save-model needs a file path, got ''; leave the flag out to save nothing")
        if args.save_model is not None:  # an output path is checked before the dataset scan (issue 30)
            from .training import check_output_file

            check_output_file(args.save_model, "--save-model")
        if coerce_value("--if-missing", args.if_missing, bool) and _complete_already(cfg):
            return 0
        run = train(cfg, save_model=args.save_model)
    except (ConfigError, DatasetError) as e:
        distributed.cleanup(barrier=False)
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except (
        OSError
    ) as e:  # an unwritable or full results folder, a path under a file: one line naming the path
        distributed.cleanup(barrier=False)
        where = f": {e.filename}" if e.filename else ""
        print(f"error: {one_line(f'{e.strerror or e}{where}')}", file=sys.stderr)
        return 2
    except (RuntimeError, MemoryError) as e:
        distributed.cleanup(barrier=False)
        if not is_oom(e):
            raise
        batch = vars(args).get("batch_size", RunConfig().batch_size)
        print(
            f"error: out of memory at batch_size {batch}: use a smaller batch_size "
            f"({(str(e).strip().splitlines() or [type(e).__name__])[0][:160]})",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (results.Interrupted): the run is marked interrupted
        distributed.cleanup(barrier=False)
        where, status = getattr(e, "run_outcome", (None, None))
        said = (
            "the finished epochs are kept, status 'interrupted'"
            if status == "interrupted"
            else f"{where} has status {status!r}"
            + (" (the signal came as it landed)" if status == "complete" else "")
            if where
            else "no results were written by this process"
        )
        print(f"interrupted ({e or 'Ctrl-C'}): {said}", file=sys.stderr)
        return 128 + int(e.signum) if isinstance(e, results.Interrupted) else 130
    except BaseException:
        distributed.cleanup(barrier=False)
        raise
    distributed.cleanup()
    if not distributed.read_env().is_main:
        return 0
    last = run.epochs.iloc[-1]
    print(f"done: {run.run_dir} (epoch {int(last.epoch)}: loss {last.loss:.4f}, acc {100 * last.acc:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
