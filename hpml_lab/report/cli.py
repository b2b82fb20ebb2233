"""The hpml-lab command line.

    hpml-lab tasks                                   # the lab tasks and their notebooks
    hpml-lab run c1 -p epochs=2 [-f params.yaml] [--profile smoke|full]
    hpml-lab report [--profile smoke|full] [--only c1,c2]
    hpml-lab data synth cifar10 --root data          # synthetic CIFAR-10, real on-disk format
    hpml-lab data download cifar10 --root data       # the real one (needs the network)
    hpml-lab data synth tinyimagenet --root data     # synthetic tiny-imagenet-200.zip, official layout
    hpml-lab data download tinyimagenet --root data [--url URL] [--allow-partial]
    hpml-lab data download tinyimagenet --root data --source kaggle --dataset OWNER/NAME
    hpml-lab train --epochs 1 --max-batches 10       # one run, flags = RunConfig fields
    hpml-lab slurm c1 --gpus 4 [--nodes 2] [--time 01:00] [--partition P] [-p key=value]   # sbatch script
    hpml-lab slurm c1 --gpus 0 --ntasks-per-node 2                                         # CPU nodes, gloo
    hpml-lab slurm c2 --container lab.sif --overlay overlay.ext3:ro --python /ext3/env/bin/python  # apptainer
    hpml-lab slurm c2 --mem 32G --account X --gres gpu:v100:1                               # Slurm's options
    hpml-lab overlay --container lab.sif --overlay overlay.ext3 [--cuda cu126]   # the overlay's environment
    hpml-lab bench loader|step|overhead|stall|profile|all   # one JSON line each (hpml_lab.studies.bench)

Bad input is one line on stderr and exit status 2, before any compute.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..cliargs import OneLineParser, one_line
from ..config import ConfigError
from ..data import DatasetError
from ..io import PlantedFile
from .tasks import PROFILES


def _cmd_init(args) -> int:
    """Copy the task notebooks into DIR/notebooks, to edit them and run them in JupyterLab."""
    import shutil
    from pathlib import Path

    from .runner import notebooks_dir

    target = Path(args.dir) / "notebooks"
    if target.exists() and any(target.iterdir()):
        raise ConfigError(f"{target} exists and is not empty; choose another folder")
    target.mkdir(parents=True, exist_ok=True)
    for nb in sorted(notebooks_dir().glob("*.ipynb")):
        shutil.copyfile(nb, target / nb.name)
    print(f"copied {len(list(target.glob('*.ipynb')))} notebooks to {target}; open them with:")
    print(f"  {lab_command(target.resolve())}")
    try:
        from jupyter_client.kernelspec import find_kernel_specs

        registered = "hpml-lab" in find_kernel_specs()
    except Exception:  # noqa: BLE001 (no jupyter_client: the command above says what is missing)
        registered = False
    if not registered:  # the notebooks name the kernel hpml-lab: without it JupyterLab asks for another
        print(
            "the notebooks' kernel hpml-lab is not registered for this Python; register it once with:\n"
            "  "
            + shlex.join([sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "hpml-lab"])
        )
    return 0


def lab_command(folder) -> str:
    """The command that opens JupyterLab on `folder` with the Python running hpml-lab (its environment's
    kernel and packages), as a shell takes it: works as printed, whether or not the environment is
    activated."""
    return shlex.join([sys.executable, "-m", "jupyterlab", f"--notebook-dir={folder}"])


def _cmd_tasks(args) -> int:
    from . import tasks

    if getattr(args, "markdown", None) == "-":
        print(tasks.markdown_table())
        return 0
    if getattr(args, "markdown", None):
        changed = tasks.write_table(args.markdown, force=args.force)
        print(f"{args.markdown}: task table {'rewritten' if changed else 'already up to date'}")
        return 0
    width = max(len(t) for t in tasks.TASKS)
    for t in tasks.TASKS.values():
        print(f"{t.id:<{width}}  {t.title}  (notebooks/{t.notebook})")
    return 0


def _file_params(args) -> dict:
    from .runner import read_params_file

    merged: dict = {}
    for path in args.file or []:
        merged.update(read_params_file(path))
    return merged


def _cmd_run(args) -> int:
    from .runner import load_outcomes, parse_assignments, run_task, write_index

    outcome = run_task(args.task, args.profile, _file_params(args), parse_assignments(args.param or []))
    write_index(load_outcomes())
    return 0 if outcome.status == "ok" else 1


def _cmd_report(args) -> int:
    from .runner import parse_assignments, reports_dir, run_all

    if (args.bundle or args.bundle_only) and not args.rerun:  # the hand-in from the reports already rendered
        from .bundle import write_bundle
        from .runner import load_outcomes, write_index

        write_bundle(reports_dir())
        write_index(load_outcomes())  # the index links the bundle
        return 0
    only = [t.strip() for t in args.only.split(",")] if args.only is not None else None  # '' is refused
    outcomes = run_all(args.profile, _file_params(args), parse_assignments(args.param or []), only)
    failed = [o.task for o in outcomes if o.status != "ok"]
    print(
        f"index: {reports_dir() / 'index.html'} ({len(outcomes) - len(failed)} ok"
        + (f", failed: {', '.join(failed)})" if failed else ")")
    )
    if args.bundle or args.bundle_only:
        from .bundle import write_bundle
        from .runner import load_outcomes, write_index

        write_bundle(reports_dir())
        write_index(load_outcomes())  # the index links the bundle
    return 1 if failed else 0


_DATA_INTS = {
    "seed": "--seed",
    "n_train": "--n-train",
    "n_test": "--n-test",
    "classes": "--classes",
    "per_class": "--per-class",
    "val_per_class": "--val-per-class",
    "n_test_images": "--n-test-images",
}


def _cmd_data(args) -> int:
    """`hpml-lab data`: options checked (whole numbers, ranges, URLs) before anything is written; SIGTERM and
    Ctrl-C end it like an error that removes the temporary folders, never the data already in ROOT."""
    import signal

    from ..config import resolve_path
    from ..results import sigterm_interrupts

    for (
        key,
        option,
    ) in _DATA_INTS.items():  # read as text so that "1e23" is one line, not argparse's usage page
        value = getattr(args, key)
        if isinstance(value, str):
            try:
                if not value.strip().isascii():
                    raise ValueError(value)
                setattr(args, key, int(value.strip()))
            except ValueError:
                raise ConfigError(f"{option} must be a whole number, not {value!r}") from None
    if args.url is not None and args.action != "download":
        raise ConfigError("--url applies to `data download` only")
    if not str(args.root).strip():  # '' would be the current folder, silently
        raise ConfigError("--root needs a folder, got ''")
    if not str(
        args.root
    ).isprintable():  # a newline or a control character: a typo, and a name no message shows
        raise ConfigError(f"--root {args.root!r} holds a control character (a newline?); name a plain folder")
    root = resolve_path(args.root)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--root {root} is a file, not a folder")
    from ..data.checks import one_data_command, remove_stale

    try:
        with one_data_command(root), sigterm_interrupts():
            for name in remove_stale(root):  # left by a data command killed with -9
                print(f"removed {root / name}, left by a data command that was killed")
            if args.dataset == "tinyimagenet":
                return _cmd_data_tinyimagenet(args, root)
            return _cmd_data_cifar(args, root)
    except KeyboardInterrupt as e:
        term = type(e).__name__ == "Interrupted"
        part = root / "tiny-imagenet-200.zip.part"  # a download's partial file stays: the next run resumes it
        kept = (
            f"; the partial download {part} is kept: the same command resumes it"
            if args.action == "download" and part.is_file()
            else ""
        )
        print(
            f"hpml-lab: error: data {args.action} {args.dataset} {'terminated' if term else 'interrupted'}; "
            f"nothing half-written is left in {root}, what was there before is unchanged{kept}",
            file=sys.stderr,
        )
        return 128 + (int(getattr(e, "signum", signal.SIGTERM)) if term else signal.SIGINT)


def _cmd_data_cifar(args, root) -> int:
    from ..data import cifar

    if args.dataset != "cifar10":
        raise ConfigError(f"dataset {args.dataset!r} is not available; valid: cifar10, tinyimagenet")
    if args.source != "http" or args.kaggle_dataset or args.allow_partial:
        raise ConfigError(
            "--source, --dataset and --allow-partial apply to tinyimagenet only; CIFAR-10 comes "
            "through torchvision (--url for a mirror)"
        )
    if args.action == "synth":
        if args.if_missing and (root / cifar.FOLDER).exists():
            kind = cifar.check(root)
            print(f"{root / cifar.FOLDER} already holds {kind} CIFAR-10; nothing to do")
            return 0
        from .dataprep import synthesize

        synthesize(
            "cifar10", root, seed=args.seed, n_train=args.n_train, n_test=args.n_test, force=args.force
        )
    else:
        path = cifar.download(root, url=args.url)
        print(f"CIFAR-10 ready and md5-checked in {path}")
    return 0


def _cmd_data_tinyimagenet(args, root) -> int:
    from ..data import tinyimagenet

    if args.action == "synth":
        if args.if_missing and (root / tinyimagenet.FOLDER / tinyimagenet.RECORD).exists():
            print(
                f"{root / tinyimagenet.FOLDER} already holds {tinyimagenet.check(root)} Tiny ImageNet; "
                f"nothing to do"
            )
            return 0
        from .dataprep import synthesize

        synthesize(
            "tinyimagenet",
            root,
            classes=args.classes,
            per_class=args.per_class,
            val_per_class=args.val_per_class,
            n_test=args.n_test_images,
            seed=args.seed,
            force=args.force,
            archive_only=args.archive_only,
        )
    elif args.source == "kaggle":
        path = tinyimagenet.download_kaggle(root, args.kaggle_dataset, allow_partial=args.allow_partial)
        print(f"Tiny ImageNet ready in {path} (from Kaggle {args.kaggle_dataset})")
    else:
        if args.kaggle_dataset:
            raise ConfigError("--dataset OWNER/NAME goes with --source kaggle")
        path = tinyimagenet.download(root, url=args.url, allow_partial=args.allow_partial)
        print(f"Tiny ImageNet ready in {path}: {tinyimagenet.record(root)['counts']}")
    return 0


def _cmd_slurm(args) -> int:
    from . import slurm
    from .runner import parse_assignments

    path = slurm.write(
        args.task,
        out=args.output,
        gpus=args.gpus,
        nodes=args.nodes,
        time=args.time,
        partition=args.partition,
        params=parse_assignments(args.param or []),
        profile=args.profile,
        ntasks_per_node=args.ntasks_per_node,
        cpus_per_task=args.cpus_per_task,
        signal_lead_s=args.signal_lead,
        train=not args.no_train,
        train_params=parse_assignments(args.train or []),
        save_model=args.save_model,
        report=not args.no_report,
        container=args.container,
        overlay=args.overlay,
        binds=args.bind,
        python=args.python,
        mem=args.mem,
        account=args.account,
        gres=args.gres,
        force=args.force,
    )
    print(f"wrote {path}; submit it with: sbatch {path}")
    if args.container is not None:  # written on a login node, run on another: a note, not an error
        _, files = slurm.container_command(args.container, args.overlay, args.bind, args.gpus)
        for f in files:
            if not Path(f).exists():
                print(
                    f"note: {f} is not on this machine; the job checks it on its node before the first step"
                )
    return 0


def _cmd_overlay(args) -> int:
    from . import overlay

    path = overlay.write(
        out=args.output,
        force=args.force,
        container=args.container,
        overlay=args.overlay,
        env=args.env,
        size=args.size,
        cuda=args.cuda,
        index=args.torch_index,
        base_python=args.base_python,
        binds=args.bind,
    )
    print(f"wrote {path}; run it once where the package index is reachable (a login node): bash {path}")
    return 0


def _cmd_bench(args) -> int:
    from ..studies import bench

    opts = {
        k: getattr(args, k)
        for k in (
            "data_root",
            "device",
            "repeats",
            "warmup",
            "model",
            "batch_size",
            "num_workers",
            "steps",
            "precision",
        )
    }
    return bench.main(args.names, **opts)


def _cmd_train(args, rest: list[str]) -> int:
    from ..__main__ import main as train_main

    return train_main(rest)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="hpml-lab",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    sub = p.add_subparsers(dest="command", required=True)
    tl = sub.add_parser("tasks", help="list the lab tasks")
    tl.add_argument(
        "--markdown",
        nargs="?",
        const="-",
        metavar="README.md",
        help="print the README's task table from the TASKs; with a file, rewrite the table between its "
        "markers",
    )
    tl.add_argument(
        "--force",
        action="store_true",
        help="with --markdown FILE: replace a table edited by hand (the file is kept as FILE.edited first)",
    )
    ini = sub.add_parser("init", help="copy the task notebooks into DIR/notebooks to edit them")
    ini.add_argument("dir", nargs="?", default=".")

    def run_options(sp):
        sp.add_argument(
            "-p", "--param", action="append", metavar="KEY=VALUE", help="set a parameter (repeatable)"
        )
        sp.add_argument(
            "-f", "--file", action="append", metavar="PARAMS.yaml", help="YAML file of parameters"
        )
        sp.add_argument(
            "--profile",
            default="smoke",
            choices=list(PROFILES),
            help="smoke: seconds on 2 CPU cores; full: the lab's setting, for a GPU (default smoke)",
        )

    r = sub.add_parser("run", help="run one task's notebook and render its HTML report")
    r.add_argument("task")
    run_options(r)
    rep = sub.add_parser("report", help="run every task and write reports/index.html")
    run_options(rep)
    rep.add_argument("--only", metavar="IDS", help="comma-separated task ids")
    rep.add_argument(
        "--bundle",
        action="store_true",
        help="write reports/bundle.html (+ .pdf with Chromium) from the "
        "reports already rendered, in seconds: nothing is run; it says which reports are missing",
    )
    rep.add_argument("--rerun", action="store_true", help="with --bundle: run every task first, then bundle")
    rep.add_argument("--bundle-only", action="store_true", help=argparse.SUPPRESS)  # the old name of --bundle

    d = sub.add_parser("data", help="prepare datasets")
    d.add_argument("action", choices=["synth", "download"])
    d.add_argument("dataset", help="cifar10 or tinyimagenet")
    d.add_argument("--root", default="data", help="dataset folder (default: data/ in the project)")
    d.add_argument("--seed", default=0, help="synth: generator seed")
    d.add_argument("--n-train", default=50_000, help="synth: training images (multiple of 5)")
    d.add_argument("--n-test", default=10_000, help="synth: test images")
    d.add_argument("--force", action="store_true", help="synth: rewrite an existing synthetic copy")
    d.add_argument("--if-missing", action="store_true", help="synth: do nothing when the dataset is there")
    d.add_argument("--url", help="download: a mirror of the official archive")
    d.add_argument(
        "--allow-partial",
        action="store_true",
        help="tinyimagenet download: accept fewer than the official 200 classes / 100,000 / 10,000 images",
    )
    d.add_argument(
        "--source", choices=["http", "kaggle"], default="http", help="tinyimagenet download: where from"
    )
    d.add_argument("--dataset", dest="kaggle_dataset", metavar="OWNER/NAME", help="with --source kaggle")
    d.add_argument("--classes", default=200, help="tinyimagenet synth: classes (1 to 200)")
    d.add_argument("--per-class", default=10, help="tinyimagenet synth: training images per class")
    d.add_argument("--val-per-class", default=2, help="tinyimagenet synth: validation images per class")
    d.add_argument("--n-test-images", default=20, help="tinyimagenet synth: unlabelled test images")
    d.add_argument(
        "--archive-only", action="store_true", help="tinyimagenet synth: write the zip, do not prepare it"
    )

    sl = sub.add_parser(
        "slurm", help="write an sbatch script: torchrun training, then the notebook and its HTML"
    )
    sl.add_argument("task")
    sl.add_argument(
        "--gpus",
        type=int,
        help="GPUs per node (default 1, or the count --gres names; 0: CPU nodes, gloo, no GPU asked for)",
    )
    sl.add_argument(
        "--ntasks-per-node", type=int, help="with --gpus 0: training processes per node (default 1)"
    )
    sl.add_argument(
        "--cpus-per-task", type=int, default=1, help="with --gpus 0: CPUs per process (default 1)"
    )
    sl.add_argument(
        "--signal-lead",
        type=int,
        metavar="SECONDS",
        help="Slurm's warning signal this long before the limit: the job stops cleanly "
        "(default 180, or a quarter of a shorter limit)",
    )
    sl.add_argument(
        "--no-train", action="store_true", help="leave out the torchrun training step (sweep-only tasks)"
    )
    sl.add_argument(
        "--no-report", action="store_true", help="leave out the notebook step (DDP training only)"
    )
    sl.add_argument(
        "--train",
        action="append",
        metavar="KEY=VALUE",
        help="a RunConfig setting for the training step only, e.g. loader=tensor (repeatable)",
    )
    sl.add_argument("--save-model", metavar="PATH", help="the training step writes its final weights here")
    sl.add_argument(
        "--container",
        metavar="IMAGE.sif",
        help="run every step inside this image with apptainer exec (or singularity exec), --nv with GPUs",
    )
    sl.add_argument(
        "--overlay", metavar="FILE[:ro]", help="with --container: an overlay image (e.g. overlay.ext3:ro)"
    )
    sl.add_argument(
        "--bind",
        action="append",
        metavar="SRC[:DST[:ro]]",
        help="with --container: a folder bound into the container (repeatable)",
    )
    sl.add_argument("--nodes", type=int, default=1, help="nodes (default 1; more uses srun + torchrun c10d)")
    sl.add_argument("--time", default="01:00", help="wall-time limit HH:MM (default 01:00)")
    sl.add_argument("--partition", help="Slurm partition")
    sl.add_argument("--account", help="Slurm account to charge (sbatch --account)")
    sl.add_argument("--mem", metavar="SIZE", help="memory per node, as sbatch reads it (e.g. 32G)")
    sl.add_argument(
        "--gres",
        metavar="gpu[:TYPE]:N",
        help="ask for the GPUs as a generic resource (e.g. gpu:v100:2) instead of --gpus-per-node",
    )
    sl.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter every step runs, written into the script (in a container: e.g. "
        "/ext3/env/bin/python; default: the image's python3, or .venv/bin/python without a container)",
    )
    sl.add_argument(
        "--force",
        action="store_true",
        help="replace a script there that was edited (it is kept as NAME.edited)",
    )
    sl.add_argument(
        "-p", "--param", action="append", metavar="KEY=VALUE", help="set a parameter (repeatable)"
    )
    sl.add_argument(
        "--profile", default="full", choices=list(PROFILES), help="parameter profile (default full)"
    )
    sl.add_argument(
        "-o", "--output", metavar="PATH", help="script path (default slurm/TASK-NODESxGPUS.sbatch)"
    )

    ov = sub.add_parser(
        "overlay",
        help="write the script that puts hpml-lab's Python environment and kernel into an Apptainer overlay",
    )
    ov.add_argument("--container", required=True, metavar="IMAGE.sif", help="the image the jobs run in")
    ov.add_argument(
        "--overlay",
        required=True,
        metavar="FILE",
        help="the overlay to fill (made if missing), e.g. overlay.ext3",
    )
    ov.add_argument("--env", default="/ext3/env", help="the environment's folder inside the container")
    ov.add_argument("--size", default="15G", help="a new overlay's size, M or G (default 15G)")
    ov.add_argument(
        "--cuda",
        metavar="TAG",
        help="torch built for this CUDA (cu126, cu128, ...: what the driver supports)",
    )
    ov.add_argument("--torch-index", metavar="URL", help="the index torch and torchvision come from")
    ov.add_argument("--base-python", metavar="PATH", help="the container's Python 3.11+ to make the env with")
    ov.add_argument(
        "--bind",
        action="append",
        metavar="SRC[:DST[:ro]]",
        help="a folder bound into the container (repeatable)",
    )
    ov.add_argument("-o", "--output", metavar="PATH", help="script path (default slurm/overlay.sh)")
    ov.add_argument("--force", action="store_true", help="replace an edited script (kept as NAME.edited)")

    b = sub.add_parser(
        "bench", help="run benchmarks; each prints one JSON line and saves it under benchmarks/results/"
    )
    b.add_argument("names", nargs="+", metavar="NAME", help="loader, step, overhead, stall, profile or all")
    b.add_argument("--data-root", default="data", help="CIFAR-10 folder (default: data/)")
    b.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    b.add_argument("--repeats", type=int, default=5, help="timed repeats (median and spread over them)")
    b.add_argument("--warmup", type=int, default=1, help="untimed warm-up repeats per variant")
    b.add_argument("--model", default="resnet18")
    b.add_argument("--batch-size", type=int, default=128)
    b.add_argument("--num-workers", type=int, default=2, help="baseline DataLoader workers")
    b.add_argument(
        "--steps", type=int, default=None, help="training steps per timed repeat (default: by device)"
    )
    b.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "fp32", "tf32", "bf16", "fp16"],
        help="the fast path's precision (default auto: bf16 on CUDA, fp32 on a CPU)",
    )

    sub.add_parser("train", help="train one run (flags: python -m hpml_lab --help)", add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0] == "train":
        return _cmd_train(None, argv[1:])
    args = parser.parse_args(argv)
    handlers = {
        "tasks": _cmd_tasks,
        "init": _cmd_init,
        "run": _cmd_run,
        "report": _cmd_report,
        "data": _cmd_data,
        "slurm": _cmd_slurm,
        "overlay": _cmd_overlay,
        "bench": _cmd_bench,
    }
    try:
        return handlers[args.command](args)
    except (ConfigError, DatasetError) as e:
        print(f"hpml-lab: error: {one_line(e)}", file=sys.stderr)
        return 2
    except PlantedFile as e:  # a link or FIFO where hpml-lab keeps its own file: named first, then why
        print(f"hpml-lab: error: {one_line(f'{e.filename} {e.strerror}')}", file=sys.stderr)
        return 2
    except OSError as e:  # a folder that is a file, a read-only or full disk, a path that does not exist
        where = f": {e.filename}" if e.filename else ""
        print(f"hpml-lab: error: {one_line(f'{e.strerror or e}{where}')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (results.Interrupted, e.g. a Slurm time limit)
        print(
            "hpml-lab: interrupted; completed results are kept, the index says which task stopped (a rerun's "
            "stop keeps the complete report it would have replaced)",
            file=sys.stderr,
        )
        return 128 + int(getattr(e, "signum", 15)) if type(e).__name__ == "Interrupted" else 130


if __name__ == "__main__":
    sys.exit(main())
