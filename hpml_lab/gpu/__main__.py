"""The GPU check kit's command: `python3 -m hpml_lab.gpu wheels | plan | run | unpack` (the Makefile's gpu-*
targets run it; on the node, where make may be missing, the plan's own lines)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from ..cliargs import OneLineParser
from ..config import ConfigError
from ..report import gpuplan
from ..report.gpuplan import GPU_PYTHON
from . import __doc__ as KIT_DOC
from .run import check, run
from .unpack import unpack
from .wheels import (
    MACHINERY,
    copy_course,
    download_wheels,
    install,
    machinery_here,
    use_course,
    use_provenance,
    write_provenance,
)


def main(argv: list[str] | None = None) -> int:
    import tempfile

    p = OneLineParser(prog="python3 -m hpml_lab.gpu", description=KIT_DOC.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser(
        "wheels", help="download the wheels the GPU image lacks; record the commit beside them"
    )
    w.add_argument("--dest", default=".whl")
    w.add_argument(
        "--python-version", default=GPU_PYTHON, help=f"the Python the wheels are for ({GPU_PYTHON})"
    )
    r = sub.add_parser("run", help="run one command of the plan (--part N) or the units named (--units)")
    r.add_argument("--part", type=int, help="the plan's command number (python3 -m hpml_lab.gpu plan)")
    r.add_argument("--units", default="", help="comma-separated units instead: tests, bench, task ids")
    r.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    r.add_argument("--out")
    r.add_argument("--site", help="where the wheels go (default: $TMPDIR/hpml-site)")
    r.add_argument("--wheels", default=".whl")
    r.add_argument("--pack", default=os.environ.get("OUT") or None, help="pack after each unit here ($OUT)")
    r.add_argument(
        "--limit",
        type=float,
        help="seconds this command may run (the plan's for --part): then it stops as at a job's time limit",
    )
    r.add_argument("--rerun", default="", help="comma-separated units to run again though they came home")
    pl = sub.add_parser("plan", help="print the commands of the check with their estimates")
    pl.add_argument("--json", action="store_true", help="the whole plan with every figure's basis, as JSON")
    u = sub.add_parser("unpack", help="merge archives that came home into reports/gpu/<gpu-name>/")
    u.add_argument("archive")
    u.add_argument("--dest")
    args = p.parse_args(argv)
    try:
        if args.cmd == "wheels":
            if not re.fullmatch(r"3\.\d{1,2}(\.\d{1,2})?", args.python_version):
                raise ConfigError(f"--python-version must look like 3.12.3, not {args.python_version!r}")
            download_wheels(args.dest, python=args.python_version)
            copy_course(args.dest)
            print(f"[gpu-wheels] provenance: {write_provenance(args.dest)}")
        elif args.cmd == "plan":
            print(json.dumps(gpuplan.plan(), indent=1) if args.json else gpuplan.text())
        elif args.cmd == "unpack":
            unpack(args.archive, args.dest)
        else:
            # --limit counts from here: the wheels' install is the command's time too
            started = time.monotonic()
            units = [t for t in args.units.split(",") if t] or None
            rerun = [t for t in args.rerun.split(",") if t]
            if units and args.part:
                raise ConfigError("say --part N (see the plan) or --units a,b, not both")
            check(args.part, units, rerun, args.limit, args.pack)  # before the wheels and any data
            # the CPU rehearsal uses the environment it runs in where the notebook machinery imports (the
            # project's venv): the carried wheels are the node's, built for its Python, maybe not this one's
            if args.device == "cpu" and machinery_here():
                print(
                    "[gpu-check] the notebook machinery imports here: the carried wheels are not installed"
                    " (a CPU rehearsal runs in this environment)"
                )
            elif Path(args.wheels).is_dir() and any(Path(args.wheels).glob("*.whl")):
                install(args.wheels, args.site or os.path.join(tempfile.gettempdir(), "hpml-site"))
            elif not machinery_here():
                raise ConfigError(
                    f"no wheels in {args.wheels} and no {', '.join(MACHINERY)} here: carry .whl (make "
                    f"gpu-wheels)"
                )
            use_provenance(args.wheels)
            use_course(args.wheels)
            out = run(
                args.part,
                args.device,
                args.out,
                units,
                pack_to=args.pack,
                limit=args.limit,
                rerun=rerun,
                started=started,
            )
            print(f"[gpu-check] done: {out}")
    except ConfigError as e:
        print(f"gpu-check: error: {e}", file=sys.stderr)
        return 2
    # the unit it cut off is in the manifest as "interrupted", packed with the rest
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(
            f"gpu-check: stopped by {signal.Signals(signum).name}: the units finished before it are in the "
            f"manifest and packed{f' in {args.pack}' if getattr(args, 'pack', None) else ''}; run the "
            f"command again to go on",
            file=sys.stderr,
        )
        return 128 + int(signum)
    return 0


if __name__ == "__main__":
    sys.exit(main())
