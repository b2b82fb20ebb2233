"""The GPU check kit's plan: which units run in which device command, each command's estimate on a bare
machine, and the basis of every figure.

    python3 -m hpml_lab.gpu plan    # the commands to run, one per line, then the plan as JSON

This check's limits: 15 minutes of device time a session (the device tool's README, 2026-11-26: each start,
command and the 30 s a machine stays held after each counted), 10 minutes a command, the machine bare at every
command (nothing installed or written survives). The plan gives itself two commands, 9 minutes and 4, each
counting a start, the install of the carried wheels and the synthetic data, and packs the units (a node
record, the CUDA tests, the benchmarks, the lab tasks) into them in priority order; what does not fit is
named, not silently dropped, and a command whose own units came home goes on down the rest. Unit estimates are
predictions where a unit changed after a GPU check timed it, else the GPU checks' seconds where one timed the
unit (a task's TASK.gpu_timed; the kit's own units' in PREDICTED and MEASURED), else predictions (FLOPs at an
assumed rate on an H100, the PIL loader's measured cost, the review's reference figures).

Per-task inputs come from one function, task_inputs(): the only place that reads the task table.
"""

from __future__ import annotations

import math
from typing import Any

# Packages the GPU image holds (notes/gpu-machine.md, its whole list): never carried. The kit's rehearsal test
# builds a Python with exactly these (those of them installed here) to run the kit as the GPU machine would.
IMAGE_HAS = set(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx
onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning
pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn
sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers statsmodels sympy
tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz
torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp""".split()
)
GPU_PYTHON = "3.12.3"  # the GPU image's Python (a Requires-Python such as >=3.12.1 needs the micro version)

# This check's budget: the device machine lends 15 minutes of device time a session (its start, each command
# and the 30 s it stays held after each counted), 10 minutes a command, and starts no machine with under 4
# minutes left. So two commands, each of which may land on a bare machine, as on a cluster's short GPU
# partition: the first planned within 8 minutes, its start included, the second within 4. Each runs with
# --limit (its time less the start), after which it stops itself as a job's time limit would (SIGTERM: the
# unit it cuts off is recorded as interrupted, everything before it packed), and its call is given GRACE_S
# more for that. At worst (480 + 60) + 30 + (240 + 60) + 30 = 900 s, and the second command finds 330 s left,
# more than the 240 a start needs.
DEVICE_TIME_S = 900.0
IDLE_S = 30.0  # the machine stays held this long after each command, counted
# each command's planned time, its start included (its call gets GRACE_S more)
COMMAND_LIMITS_S = (480.0, 240.0)
# a bare machine's start: about 32 s measured on an H200 and about 30 s on an H100 (device time held less the
# commands' own, 2026-11-26 and 2026-11-27); notes/gpu-machine.md said 60-120 s; planned at 45 s
START_S = 45.0
GRACE_S = (
    60.0  # beyond --limit: a stopped kernel's 30 s to record its end (kernel.KERNEL_GRACE_S), and the packing
)
CHECK_LIMIT_S = DEVICE_TIME_S - (IDLE_S + GRACE_S) * len(COMMAND_LIMITS_S)
MAX_COMMANDS = len(COMMAND_LIMITS_S)


def command_limit(part: int) -> float:
    """Part `part`'s time, its start included (COMMAND_LIMITS_S)."""
    return COMMAND_LIMITS_S[part - 1]


def run_limit(part: int) -> int:
    """The --limit of part `part`: its time less the machine's start (the start is not the command's own)."""
    return int(command_limit(part) - START_S)


# Set-up on a bare machine, measured on this project's 2-core development machine on 2026-11-25 as CPU time
# (user + sys) of one process, since the GPU machine's 16 idle cores give each its own core (the wall time
# here, at load 18-20 from other work, was 9-17 times longer), then planned at about 1.5 times that for disk
# and a slower core. The manifest of the first run measures them (node-part<N>.json, each unit's seconds).
INSTALL_S = (
    10.0,
    "the 46 carried wheels (23 MiB) by pip --target with Python 3.12.1: 4.4 s CPU measured here, "
    "planned 10 s",
)
DATA_S = {
    "cifar10": (
        15.0,
        "synthetic CIFAR-10, 60,000 images: 18.6 s CPU measured here, 9 s on the H100's 16 cores, planned 15 "
        "s",
    ),
    "tinyimagenet": (15.0, "synthetic Tiny ImageNet, 2,400 images: 8.9 s CPU measured here, planned 15 s"),
}
NODE_RECORD_S = (5.0, "nvidia-smi, df /dev/shm, versions: a few seconds (predicted)")

# FLOPs of one ResNet-18 training step (forward and backward) per image, as hpml_lab.flops counts them over
# one image: CIFAR-10 (32x32, the CIFAR stem, 10 classes) and Tiny ImageNet (64x64, the ImageNet stem, 200
# classes). Written here because counting them takes seconds of CPU in every process that plans (the plan,
# each command, each unpack); tests/unit/test_gpucheck.py counts them again and fails if they differ.
STEP_FLOPS = {"cifar10": 3_328_997_376, "tinyimagenet": 869_621_760}
# reference: bf16 8192^3 products measured 769-798 TFLOP/s on the lent H100 (notes/gpu-machine.md)
H100_BF16_TFLOPS = 780.0
# predicted: the lab's eager fp32 step (convolutions in TF32 under cuDNN) at batch 128 sustains about 13% of
# that
EAGER_SHARE = 0.13
# measured: lab_transform on one 32x32 PIL image, one core of this 2-core CPU (2026-11-24): 380 us
PIL_S_PER_IMAGE = 380e-6
# predicted: 8 workers' start (0.5 s) and the test pass, 10,000 images at the loader's rate (0.5 s), and slack
EPOCH_OVERHEAD_S = 1.5
# predicted: a task's kernel start and torch import (about 5 s), figures and the HTML render (about 3 s); the
# tiny tasks take 10-20 s each on the 2 shared cores here
KERNEL_S = 10.0
BENCH_REPEATS = 2

FIXED = {
    "tests": (180.0, "reference (review): pytest -m cuda, about 3 min"),
    "bench": (
        120.0,
        f"reference (review): hpml-lab bench all on CUDA, 4-6 min at 5 repeats, so about 1 min a repeat;"
        f" the kit runs {BENCH_REPEATS}",
    ),
}
# The kit's own units, before and among the lab tasks in priority order (notes/gpu-review.md: check these
# first): the node and the CUDA tests first, then the speed ladder and the benchmarks (the profile of the fast
# step beside a plain script's is the first thing to read on a new GPU), then the lab's tasks. Each task's
# priority, and the task whose command it must share, are its TASK's (gpu_priority, gpu_with): no per-task
# table here. bench opens with the profile of the fast step beside a plain script's
SPECIAL_PRIORITY = {"tests": 0, "bench": 6}
SPECIAL = ("tests", "bench")  # units that are not lab tasks


def task_inputs() -> dict[str, dict[str, Any]]:
    """Every lab task's inputs to the plan: {task id: {"profile": its gpu profile, "runs": training runs per
    epoch setting, "extra_s": seconds beside the epochs (a number, or the task's function of its profile,
    steps and workers), "why": what those are, "timed": what a GPU check timed of it (or None), "priority",
    "with": a task whose command it shares}}, from each task's TASK."""
    from . import tasks

    return {
        tid: {
            "profile": t.profile("gpu"),
            "runs": t.gpu_runs,
            "extra_s": (t.gpu_extra or (0.0, ""))[0],
            "why": (t.gpu_extra or (0.0, ""))[1],
            "priority": t.gpu_priority,
            "with": t.gpu_with,
            "timed": t.gpu_timed,
        }
        for tid, t in tasks.TASKS.items()
    }


def data_needed(unit: str) -> list[str]:
    """The synthetic data sets a unit reads (the CUDA tests make their own)."""
    if unit in SPECIAL:
        return [] if unit == "tests" else ["cifar10"]
    dataset = task_inputs()[unit]["profile"].get("dataset", "cifar10")
    return ["cifar10"] + ([dataset] if dataset != "cifar10" else [])


def step_seconds(flops_per_step: float) -> float:
    """Predicted GPU seconds of one eager training step."""
    return flops_per_step / (H100_BF16_TFLOPS * 1e12 * EAGER_SHARE)


def task_estimate(task_id: str, inputs: dict[str, Any] | None = None) -> tuple[float, str]:
    """(seconds, basis) of one task at the gpu profile on an H100."""
    facts = inputs or task_inputs()[task_id]
    p = facts["profile"]
    tiny_imagenet = p.get("dataset") == "tinyimagenet"
    n_images = 100_000 if tiny_imagenet else 50_000
    batch = int(p.get("batch_size", 128))
    steps = math.ceil(n_images / batch)
    if p.get("max_batches"):
        steps = min(steps, int(p["max_batches"]))
    fpi = STEP_FLOPS["tinyimagenet" if tiny_imagenet else "cifar10"]
    compute = step_seconds(fpi * batch)
    workers = max(1, int(p.get("num_workers", 0) or 1))
    loader = batch * PIL_S_PER_IMAGE / workers
    epoch = steps * max(compute, loader) + EPOCH_OVERHEAD_S
    runs = facts["runs"] * int(p.get("epochs", 1))
    seconds = KERNEL_S + runs * epoch
    basis = (
        f"{runs} epochs x ({steps} steps x max(compute {1000 * compute:.1f} ms = {fpi * batch / 1e12:.2f} "
        f"TFLOP / {H100_BF16_TFLOPS * EAGER_SHARE:.0f} TFLOP/s, loader {1000 * loader:.1f} ms = {batch} x "
        f"{PIL_S_PER_IMAGE * 1e6:.0f} us / {workers} workers) + {EPOCH_OVERHEAD_S:.1f} s) + kernel "
        f"{KERNEL_S:.0f} s"
        if runs
        else f"kernel {KERNEL_S:.0f} s"
    )
    extra, why = facts["extra_s"], facts["why"]
    if callable(extra):  # computed by the task from its profile (c5's CPU row, dataloading's sleeps)
        extra = float(extra(p, steps, workers))
    if extra:
        seconds += extra
        basis += f" + {extra:.0f} s {why}"
    return seconds, basis


# The kit's own units, timed by the GPU checks (one H200, 2026-11-26 and again 2026-11-28, at the code that
# runs them now: reports/gpu/NVIDIA-H200/manifest.json; one H100, 2026-11-26:
# reports/gpu/NVIDIA-H100-80GB-HBM3/manifest.json). A lab task's timing is its TASK's (gpu_timed).
# tests/unit/test_gpucheck.py checks each measured figure against the manifest its basis names.
H200_CHECK = "reports/gpu/NVIDIA-H200/manifest.json"
H100_CHECK = "reports/gpu/NVIDIA-H100-80GB-HBM3/manifest.json"
MEASURED = {
    "tests": (
        135.0,
        "measured: 135 s on an H200 (the second H200 check, 2026-11-28), pytest -m cuda with cold inductor "
        "caches",
    ),
    "bench": (64.0, "measured: 64 s on an H200 (the second H200 check, 2026-11-28), its five benchmarks"),
}
# Predicted: the kit's units whose work changed after their measurement above (none since the second H200
# check; the 2026-11-28 predictions, tests 140 s and bench 120 s, were measured at 135 s and 64 s).
PREDICTED: dict[str, tuple[float, str]] = {}


def unit_estimate(unit: str) -> tuple[float, str]:
    """(seconds, basis) of one unit: the kit's own from its tables, a task's from what a GPU check timed of it
    (its TASK's gpu_timed), else from the plan's model."""
    if unit in SPECIAL:
        return PREDICTED.get(unit) or MEASURED.get(unit) or FIXED[unit]
    timed = task_inputs()[unit]["timed"]
    return tuple(timed) if timed else task_estimate(unit)


def units() -> list[str]:
    """Every unit of a full check, in priority order (the kit's own units by SPECIAL_PRIORITY, tasks by their
    TASK's gpu_priority; ties in lab order)."""
    inputs = task_inputs()
    every = list(SPECIAL) + list(inputs)
    rank = {**{u: inputs[u]["priority"] for u in inputs}, **SPECIAL_PRIORITY}
    return sorted(every, key=lambda u: rank[u])


def together() -> dict[str, str]:
    """{task: the task whose device command it must share} (questions reads C6's results)."""
    return {tid: i["with"] for tid, i in task_inputs().items() if i["with"]}


def command_line(part: int) -> str:
    """The command as it is run on the GPU machine: python3 from the tree's root, no make (it may be missing),
    with the --limit that ends it inside its share of the lease."""
    return f"python3 -m hpml_lab.gpu run --part {part} --limit {run_limit(part)}"


def setup_estimate(us: list[str]) -> tuple[float, str]:
    """Seconds from a bare machine's start to the first unit: the wheels and the data the units read."""
    sets = sorted({d for u in us for d in data_needed(u)})
    s = START_S + INSTALL_S[0] + NODE_RECORD_S[0] + sum(DATA_S[d][0] for d in sets)
    basis = (
        f"start {START_S:.0f} s (bare machine, reference) + wheels {INSTALL_S[1]} + the machine's record"
        f" {NODE_RECORD_S[1]}"
    ) + "".join(f" + data {DATA_S[d][1]}" for d in sets)
    return s, basis


def parts() -> tuple[list[list[str]], list[str]]:
    """The units of each command (first fit in priority order, units that share a command kept together) and
    what fits in none."""
    groups: list[list[str]] = []
    for u in units():
        with_ = together().get(u)
        if with_ and any(with_ in g for g in groups):
            next(g for g in groups if with_ in g).append(u)
        else:
            groups.append([u])
    cmds: list[list[str]] = []
    left: list[str] = []
    for g in groups:
        home = next((c for i, c in enumerate(cmds, 1) if _command_seconds(c + g) <= command_limit(i)), None)
        if home is None and len(cmds) < MAX_COMMANDS and _command_seconds(g) <= command_limit(len(cmds) + 1):
            home = []
            cmds.append(home)
        if home is None:
            left += g
        else:
            home.extend(g)
    return cmds, left


def _command_seconds(us: list[str]) -> float:
    return setup_estimate(us)[0] + sum(unit_estimate(u)[0] for u in us)


def plan() -> dict[str, Any]:
    """The plan: each command's units, estimate on a bare machine and basis; the total with every start; what
    was left out."""
    cmds, left = parts()
    rows = []
    for i, us in enumerate(cmds, 1):
        setup, sbasis = setup_estimate(us)
        ests = [(u, *unit_estimate(u)) for u in us]
        est = setup + sum(s for _, s, _ in ests)
        rows.append(
            {
                "part": i,
                "command": command_line(i),
                "units": us,
                "estimate_s": round(est),
                "setup_s": round(setup),
                "basis": f"set-up {setup:.0f} s: {sbasis}; "
                + "; ".join(f"{u} {s:.0f} s: {b}" for u, s, b in ests),
                "limit_s": command_limit(i),
                "fits": est <= command_limit(i),
            }
        )
    total = sum(r["estimate_s"] for r in rows)
    # the whole lab against what one check holds: every unit's seconds beside the set-ups, and the seconds a
    # check leaves its units (each command's limit less its set-up)
    every = sum(unit_estimate(u)[0] for u in units())
    room = sum(command_limit(i) - r["setup_s"] for i, r in enumerate(rows, 1))
    return {
        "commands": rows,
        "left_out": {u: round(unit_estimate(u)[0]) for u in left},
        "every_unit_s": round(every),
        "units_room_s": round(room),
        "checks_for_every_unit": math.ceil(every / room) if room > 0 else None,
        "total_s": total,
        "command_limits_s": list(COMMAND_LIMITS_S),
        "check_limit_s": CHECK_LIMIT_S,
        "total_basis": "every command on a bare machine: its start, wheels and data counted in each",
        "fits": len(rows) <= MAX_COMMANDS and total <= CHECK_LIMIT_S and all(r["fits"] for r in rows),
    }


def came_home(units: Any, tree: str) -> tuple[set[str], set[str]]:
    """(the units of a manifest's `units` whose ok came home from the code whose digest is `tree`, those whose
    ok came from other code): a page of an earlier commit's code, or of a kit that recorded no tree, is no
    page of this code, so a command runs it again."""
    ok = {u for u, r in units.items() if isinstance(r, dict) and r.get("status") == "ok"}
    this = {u for u in ok if units[u].get("tree") == tree}
    return this, ok - this


def home(root=None) -> dict[str, dict[str, list[str]]]:
    """{GPU folder: {'this code': the units whose ok came home there from this tree's code, 'other code':
    those from other code}}, from the manifests the tree holds (reports/gpu/*/)."""
    import json
    from pathlib import Path

    from ..config import project_root
    from ..envinfo import code_root, tree_digest

    tree = tree_digest(code_root())
    done = {}
    for m in sorted(Path(root or project_root()).glob("reports/gpu/*/manifest.json")):
        try:
            units = json.loads(m.read_text()).get("units", {})
            this, other = came_home(units, tree)
        except (OSError, ValueError, AttributeError):
            continue  # a damaged manifest: unpack says so; the plan is made without it
        if this or other:
            done[m.parent.name] = {"this code": sorted(this), "other code": sorted(other)}
    return done


def home_lines(root=None) -> list[str]:
    """What came home, for a person: per GPU folder, the units a command skips there (run by this code) and
    those it runs again (run by other code)."""
    lines = []
    for gpu, done in home(root).items():
        if done["this code"]:
            lines.append(
                f"# came home from {gpu}, run by this code (skipped there): {', '.join(done['this code'])}"
            )
        if done["other code"]:
            lines.append(
                f"# came home from {gpu}, run by other code (another commit's: they run again there): "
                + ", ".join(done["other code"])
            )
    return lines


def text(p: dict[str, Any] | None = None) -> str:
    """The plan for a person: the commands, one per line, then what each runs and why it fits."""
    p = p or plan()
    lines = [
        f"# the GPU check: {len(p['commands'])} commands, each from the tree's root on a bare GPU machine"
    ]
    lines += [r["command"] for r in p["commands"]]
    lines.append("")
    for r in p["commands"]:
        lines.append(
            f"# part {r['part']}: about {r['estimate_s']} s of {r['limit_s']:.0f} "
            f"(set-up {r['setup_s']} s): {', '.join(r['units'])}; it stops itself after --limit"
            f" {run_limit(r['part'])} s: give its call a time limit of {run_limit(r['part']) + GRACE_S:.0f} s"
        )
    lines.append(
        f"# total about {p['total_s']} s of {p['check_limit_s']:.0f}: a {START_S:.0f} s start counted for "
        f"each command, and {IDLE_S:.0f} s held after each, in {DEVICE_TIME_S / 60:.0f} minutes of device "
        f"time"
    )
    lines.append(
        "# each command first records the machine (node-part<N>.json: nvidia-smi, /dev/shm's size, Python, "
        "torch and CUDA versions, make, gcc, Python.h) and packs into $OUT after every unit"
    )
    if p["left_out"]:
        lines.append(
            "# not planned (would not fit): "
            + ", ".join(f"{u} ({s} s)" for u, s in p["left_out"].items())
            + "; a command whose own units end early runs them"
        )
        lines.append(
            f"# every unit together: about {p['every_unit_s']} s beside the set-ups, where a check leaves "
            f"its units about {p['units_room_s']} s: running them all takes about "
            f"{p['checks_for_every_unit']} such checks, each skipping what the ones before it brought home"
        )
    lines.append(
        "# before each command, unpack what came home into the tree (python3 -m hpml_lab.gpu unpack DIR): a "
        "command skips every unit whose ok, run by the same code, it carries in "
        "reports/gpu/<gpu-name>/manifest.json (--rerun a,b runs them again) and, after its own units, goes "
        "on down the other units not home, in priority order, as far as its --limit allows"
    )
    lines += home_lines()
    lines.append("# basis of every figure: python3 -m hpml_lab.gpu plan --json")
    return "\n".join(lines)
