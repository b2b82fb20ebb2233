"""The GPU check kit's stages and their time estimates on one H100, each with the basis it was computed from.

    python -m hpml_lab.report.gpucheck plan     # {"stages": [{"name", "estimate_s", "command", "basis"}], "total_s"}

A lease is 30 minutes of device time, 10 minutes a command, the machine bare again after 30 s idle: every stage is
one device command that installs the wheels, writes the synthetic data and runs its part. The estimates are
predicted figures, computed from the FLOPs of the `gpu` profile's training steps at an assumed sustained rate on an
H100, the PIL loader's cost measured on a CPU here, and reference figures from the review (notes/gpu-review.md);
the first GPU run's manifest.json measures each stage and replaces them.
"""

from __future__ import annotations

import math
from typing import Any

from . import tasks

# Packages the GPU image holds (notes/gpu-machine.md, its whole list): never carried. The kit's CPU test builds a
# Python with exactly these (those of them installed here) to run the kit as the GPU machine would.
IMAGE_HAS = set(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers
flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py
markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham
simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig
werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
)
GPU_PYTHON = "3.12.3"  # the GPU image's Python (a Requires-Python such as >=3.12.1 needs the micro version)

# reference: bf16 8192^3 products measured 769-798 TFLOP/s on the lent H100 (notes/gpu-machine.md)
H100_BF16_TFLOPS = 780.0
# predicted: the lab's eager fp32 step (convolutions in TF32 under cuDNN) at batch 128 sustains about 13% of that
EAGER_SHARE = 0.13
# measured: lab_transform on one 32x32 PIL image, one core of this 2-core CPU (2026-11-24): 380 us
PIL_S_PER_IMAGE = 380e-6
# reference (review): ResNet-18, batch 128, one training step on a fast 16-core CPU: about 1.3 s
CPU_STEP_S = 1.3
# predicted: 8 workers' start (0.5 s) and the test pass, 10,000 images at the loader's rate (0.5 s), and slack
EPOCH_OVERHEAD_S = 1.5
# predicted: a task's kernel start and torch import (about 5 s), figures and the HTML render (about 3 s); the
# tiny tasks take 10-20 s each on the 2 shared cores here
KERNEL_S = 10.0
START_S = 120.0  # reference (review): the machine's start, once, 1-2 min
# reference (review): the first command, or one on a bare machine: tree transfer, wheels 15 s, synthetic data 40 s;
# a command on a warm machine (the next stage started within 30 s) finds the wheels and data there and skips them
FIRST_CALL_S, WARM_CALL_S = 75.0, 15.0
LIMIT_S, LEASE_S = 540.0, 1500.0  # each command under 9 minutes; the whole kit under 25 minutes

# Training epochs each task runs at the gpu profile (configurations x epochs, from its notebook), the extra seconds
# of what is not a training epoch, each with why, and the device command (stage) it runs in: each task declares
# them in its TASK (hpml_lab.protocol.Task gpu_runs, gpu_extra, gpu_stage).
RUNS = {t.id: t.gpu_runs for t in tasks.TASKS.values()}
EXTRA = {t.id: t.gpu_extra for t in tasks.TASKS.values() if t.gpu_extra is not None}

# Each stage is one device command; report tasks are grouped so that each group fits one command (in lab order:
# questions reads C6's results, so it shares C6's stage, since a bare machine keeps nothing between commands).
STAGES: dict[str, list[str]] = {"tests": [], "bench": []}
for _t in tasks.TASKS.values():
    STAGES.setdefault(_t.gpu_stage, []).append(_t.id)
FIXED = {
    "tests": (180.0, "reference (review): pytest -m cuda, about 3 min"),
    "bench": (200.0, "reference (review): hpml-lab bench all on CUDA, 4-6 min at 5 repeats; the kit runs 3"),
}
BENCH_REPEATS = 3


def step_seconds(flops_per_step: float) -> float:
    """Predicted GPU seconds of one eager training step."""
    return flops_per_step / (H100_BF16_TFLOPS * 1e12 * EAGER_SHARE)


def task_estimate(task_id: str) -> tuple[float, str]:
    """(seconds, basis) of one task at the gpu profile on an H100."""
    from .. import flops

    p = tasks.TASKS[task_id].profile("gpu")
    tiny_imagenet = p.get("dataset") == "tinyimagenet"
    n_images = 100_000 if tiny_imagenet else 50_000
    batch = int(p.get("batch_size", 128))
    steps = math.ceil(n_images / batch)
    if p.get("max_batches"):
        steps = min(steps, int(p["max_batches"]))
    fpi = (
        flops.step_flops_per_image("resnet18", 200, "imagenet", "bn", 64)
        if tiny_imagenet
        else flops.step_flops_per_image("resnet18")
    )
    compute = step_seconds(fpi * batch)
    workers = max(1, int(p.get("num_workers", 0) or 1))
    loader = batch * PIL_S_PER_IMAGE / workers
    epoch = steps * max(compute, loader) + EPOCH_OVERHEAD_S
    runs = RUNS.get(task_id, 1) * int(p.get("epochs", 1))
    seconds = KERNEL_S + runs * epoch
    basis = (
        f"{runs} epochs x ({steps} steps x max(compute {1000 * compute:.1f} ms = {fpi * batch / 1e12:.2f} TFLOP"
        f" / {H100_BF16_TFLOPS * EAGER_SHARE:.0f} TFLOP/s, loader {1000 * loader:.1f} ms = {batch} x"
        f" {PIL_S_PER_IMAGE * 1e6:.0f} us / {workers} workers) + {EPOCH_OVERHEAD_S:.0f} s) + kernel {KERNEL_S:.0f} s"
        if runs
        else f"kernel {KERNEL_S:.0f} s"
    )
    extra, why = EXTRA.get(task_id, (0.0, ""))
    if task_id == "c5":
        extra = int(p.get("epochs", 1)) * steps * CPU_STEP_S
    elif task_id == "dataloading":
        files, passes = int(p.get("subset", 0)), int(p.get("epochs", 1))
        extra = (
            files * 0.075 * passes / workers * 2
        )  # the baseline and the worker loader sleep; threads overlap
    if extra:
        seconds += extra
        basis += f" + {extra:.0f} s {why}"
    return seconds, basis


def plan(stages: list[str] | None = None) -> dict[str, Any]:
    """The JSON plan: every stage's estimate, command and basis, and the total with start-up and set-up."""
    rows = []
    for i, name in enumerate(stages or list(STAGES)):
        call = FIRST_CALL_S if i == 0 else WARM_CALL_S
        if name in FIXED:
            est, basis = FIXED[name]
        else:
            parts = [(t, *task_estimate(t)) for t in STAGES[name]]
            est = sum(s for _, s, _ in parts)
            basis = "; ".join(f"{t} {s:.0f} s: {b}" for t, s, b in parts)
        est += call
        rows.append(
            {
                "name": name,
                "estimate_s": round(est),
                "command": f"make gpu-check STAGE={name}",
                "basis": f"set-up {call:.0f} s ({'first command' if i == 0 else 'warm machine'}) + " + basis,
                "provenance": "predicted",
                "fits": est < LIMIT_S,
            }
        )
    total = START_S + sum(r["estimate_s"] for r in rows)
    return {
        "stages": rows,
        "total_s": round(total),
        "limit_per_stage_s": LIMIT_S,
        "lease_s": LEASE_S,
        "total_basis": f"machine start {START_S:.0f} s once + the stages (each with its set-up), run back to back",
        "fits": total < LEASE_S and all(r["fits"] for r in rows),
    }
