"""RunConfig: every parameter of a run, in one frozen dataclass; and where the project's files are.

Its field names are the notebooks' papermill parameters, the CLI's flags
(`--batch-size` or `--batch_size`) and the Slurm job's arguments. Unknown
keys, wrong types and out-of-range values are rejected with one line that says
what is wrong and what is valid, before anything is computed (the type check
and string coercion it shares with the studies' settings are in params.py).

    from hpml_lab.config import RunConfig
    cfg = RunConfig(task="c1", epochs=2)
    cfg = RunConfig.from_dict({"batch_size": "64"}, coerce=True)   # strings from a CLI
    cfg.run_dir()      # results/c1/<run-id>/ under output_path(): HPML_OUTPUT_DIR, else the project root
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

# the typed-parameter machinery lives in params.py; these names are imported from config by studies and
# report/
from .params import ConfigError, StudySettings, _short, check_types, coerce_value  # noqa: F401

DATASETS = ("cifar10", "tinyimagenet")
NORMS = ("bn", "none")
# name: (torch.optim class, its fixed keyword arguments, whether cfg.momentum applies);
# step.build_optimizer builds from this table, so a new optimizer is one entry here
OPTIMIZER_TABLE: dict[str, tuple[str, dict[str, Any], bool]] = {
    "sgd": ("SGD", {}, True),
    "sgd_nesterov": ("SGD", {"nesterov": True}, True),
    "adagrad": ("Adagrad", {}, False),
    "adadelta": ("Adadelta", {}, False),
    "adam": ("Adam", {}, False),
}
OPTIMIZERS = tuple(OPTIMIZER_TABLE)
# fp32: PyTorch's defaults (cuDNN may use TF32 for convolutions; flops records what ran); tf32: TF32 matrix
# products and convolutions on CUDA; bf16 / fp16: autocast of forward and loss, fp16 with a GradScaler
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
PROGRESS = ("auto", "bar", "plot", "log", "none")
STEMS = ("cifar", "imagenet")
LOADERS = ("pil", "tensor")
# torch.compile's modes (inductor): reduce-overhead and max-autotune capture CUDA graphs on a GPU; on a CPU
# every mode runs as plain inductor (fastpath.compile_mode says what ran)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class RunConfig:
    """One training run. Defaults are the lab's (Lab 2: ResNet-18, SGD, batch 128, 5 epochs).

    Args:
        task: task id the results are filed under (results/<task>/<run-id>/).
        dataset: "cifar10" (real or synthetic, same on-disk format) or "tinyimagenet".
        data_root: folder holding the dataset; relative paths start at the project root.
        model: registry name (see hpml_lab.models.available()).
        norm: "bn" for BatchNorm, "none" to drop it (c7).
        stem: "cifar" (3x3 conv) or "imagenet" (7x7 conv + max-pool).
        batch_size: images per step (per process under DDP).
        epochs: passes over the (possibly subset) training set.
        max_batches: stop each epoch after this many batches; 0 means the whole epoch.
        subset: use only the first N training images; 0 means all.
        num_workers: DataLoader worker processes.
        optimizer: one of sgd, sgd_nesterov, adagrad, adadelta, adam.
        lr, momentum, weight_decay: optimizer settings (momentum where it applies).
        device: "auto" (CUDA when present), "cpu" or "cuda".
        seed: seeds Python, NumPy, torch and the DataLoader's shuffling.
        augment: random crop (padding 4) and horizontal flip.
        shuffle: reshuffle the training set every epoch.
        sync_each_step: synchronize the device after every step so that data time and train time are
            disjoint intervals; off by default, since it removes the CPU/GPU overlap real training has (the
            per-step CUDA events are read at the epoch's end instead).
        log_every: in log mode, print a line every N batches.
        progress: "auto" (bars in JupyterLab, log lines in batch runs), "bar", "plot" (in JupyterLab: the bars
            and a live figure of loss and accuracy; its drawing counts in total_s), "log", "none".
        results_dir: where results/<task>/<run-id>/ goes; relative to the project root.
        run_id: name of the run folder; empty means derived from the config (stable).
        checkpoint_segments: 0 (off) or k: train a ResNet with gradient checkpointing over k
            segments of its blocks (memory task; hpml_lab.models.recompute).
        compile_backend: torch.compile backend for C8 ("inductor" by default; "aot_eager" or
            "eager" skip code generation and are for quick checks, labelled as such in the report).
        data_parallel: wrap the model in nn.DataParallel over every visible GPU (the reference projects'
            DP-vs-DDP comparison); skipped, and said so in meta.json, with fewer than 2 GPUs.
            DDP needs no flag: launching with torchrun turns it on.
        channels_last: model and input batches in channels-last memory format (fast path).
        precision: fp32, tf32, bf16 or fp16 (autocast of forward and loss; fp16 scales the loss with a
            GradScaler); on CUDA and on CPU alike where torch supports it (fast path).
        amp: deprecated, amp=true is precision="bf16".
        compile: torch.compile the training step (fast path; the first steps pay compilation): forward, loss
            and the correct count as one graph, its backward compiled with it (hpml_lab.step.Step).
        compile_mode: torch.compile's mode with the inductor backend: "default", "reduce-overhead" (CUDA
            graphs), "max-autotune" (CUDA graphs and kernel autotuning), "max-autotune-no-cudagraphs"; on a
            CPU every mode runs as plain inductor, and meta.json records the mode that ran.
        persistent_workers: keep DataLoader workers alive between epochs (needs num_workers > 0).
        loader: "pil" (the lab's per-sample PIL pipeline in a DataLoader) or "tensor" (the whole
            uint8 dataset resident on the training device, augmented batched there; see
            hpml_lab.data.gpu_loader).
    """

    task: str = "adhoc"
    dataset: str = "cifar10"
    data_root: str = "data"
    model: str = "resnet18"
    norm: str = "bn"
    stem: str = "cifar"
    batch_size: int = 128
    epochs: int = 5
    max_batches: int = 0
    subset: int = 0
    num_workers: int = 2
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    device: str = "auto"
    seed: int = 0
    augment: bool = True
    shuffle: bool = True
    sync_each_step: bool = False
    log_every: int = 20
    progress: str = "auto"
    results_dir: str = "results"
    run_id: str = ""
    checkpoint_segments: int = 0
    compile_backend: str = "inductor"
    data_parallel: bool = False
    # fast path (hpml_lab.fastpath); all off by default so the lab's baselines stay the lab's
    channels_last: bool = False
    amp: bool = False
    precision: str = "fp32"
    compile: bool = False
    compile_mode: str = "default"
    persistent_workers: bool = False
    loader: str = "pil"

    def __post_init__(self) -> None:
        check_types(self)
        if self.amp and self.precision == "fp32":
            print(
                "note: amp=true is deprecated; it means precision=bf16, which this run uses", file=sys.stderr
            )
            object.__setattr__(self, "precision", "bf16")
        elif self.amp and self.precision != "bf16":
            raise ConfigError(f"amp=true means precision=bf16, not {self.precision!r}: leave amp out")
        self._check_values()
        # record what runs: the tensor loader loads in no worker, and workers persist only where there are
        # some
        if self.loader == "tensor" and self.num_workers:
            object.__setattr__(self, "num_workers", 0)
        if self.persistent_workers and not self.num_workers:
            object.__setattr__(self, "persistent_workers", False)

    def _check_values(self) -> None:
        choices = {
            "dataset": DATASETS,
            "norm": NORMS,
            "optimizer": OPTIMIZERS,
            "device": DEVICES,
            "progress": PROGRESS,
            "stem": STEMS,
            "loader": LOADERS,
            "precision": PRECISIONS,
            "compile_mode": COMPILE_MODES,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    f"parameter {name!r} is {getattr(self, name)!r}; valid values: {', '.join(allowed)}"
                )
        for name, (low, high) in INT_RANGES.items():
            value = getattr(self, name)
            if (
                not low <= value <= high
            ):  # a value past any real use (batch 1e20) fails here, not in the kernel
                raise ConfigError(f"parameter {name!r} must be from {low} to {high}, got {_short(value)}")
        for name in (
            "data_root",
            "results_dir",
        ):  # an empty folder name would silently mean the current folder
            if not getattr(self, name).strip():
                raise ConfigError(f"parameter {name!r} is empty; name a folder ('.' for the current one)")
        for name in ("lr", "momentum", "weight_decay"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigError(f"parameter {name!r} must be a finite number, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ConfigError(f"parameter 'lr' must be positive, got {self.lr}")
        for name in ("momentum", "weight_decay"):
            if getattr(self, name) < 0:
                raise ConfigError(f"parameter {name!r} must be 0 or more, got {getattr(self, name)}")
        if self.momentum >= 1:
            raise ConfigError(f"parameter 'momentum' must be below 1, got {self.momentum}")
        if self.lr > 1e3 or self.weight_decay > 1e3:
            raise ConfigError(
                f"parameters 'lr' and 'weight_decay' must be at most 1000, got {self.lr}, {self.weight_decay}"
            )
        from hpml_lab import models  # local: everything imports config, which needs the registry only here

        if self.model not in models.available():
            raise ConfigError(
                f"parameter 'model' is {self.model!r}; valid models: {', '.join(models.available())}"
            )
        if self.stem not in models.stems(self.model):
            raise ConfigError(
                f"parameter 'stem' is {self.stem!r}; {self.model!r} supports "
                f"{', '.join(models.stems(self.model))}"
            )
        if self.checkpoint_segments and not models.accepts(self.model, "checkpoint_segments"):
            raise ConfigError(f"parameter 'checkpoint_segments' applies to ResNets only, not {self.model!r}")
        if self.checkpoint_segments:
            import torch

            with torch.device("meta"):  # the shape of the model only: no memory, no initialisation cost
                net = models.build(self.model)
            blocks = sum(len(stage) for stage in getattr(net, "layers", ()))
            if (
                blocks and self.checkpoint_segments > blocks
            ):  # more would be cut to the block count, unrecorded
                raise ConfigError(
                    f"parameter 'checkpoint_segments' is {self.checkpoint_segments} but {self.model} "
                    f"has {blocks} residual blocks; use 1 to {blocks}"
                )
        if not _plain_name(self.task):
            raise ConfigError(f"parameter 'task' must be a plain name ({NAME_RULE}), got {_short(self.task)}")
        if not self.compile_backend or not self.compile_backend.replace("_", "").isalnum():
            raise ConfigError(
                f"parameter 'compile_backend' must be a backend name, got {self.compile_backend!r}"
            )
        if self.run_id and not _plain_name(self.run_id):
            raise ConfigError(
                f"parameter 'run_id' must be a plain folder name ({NAME_RULE}), got {_short(self.run_id)}"
            )

    # ---- construction -------------------------------------------------
    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, params: Mapping[str, Any], coerce: bool = False) -> RunConfig:
        """Build from a mapping; unknown keys are an error naming the valid ones.

        With coerce=True, string values (from a command line) are converted to
        the field's type: "64" -> 64, "false" -> False, "1e-3" -> 0.001.
        """
        check_keys(params)
        if coerce:
            hints = typing.get_type_hints(cls)
            params = {k: coerce_value(k, v, hints[k]) for k, v in params.items()}
        return cls(**params)

    def replace(self, **changes: Any) -> RunConfig:
        check_keys(changes)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # ---- derived ------------------------------------------------------
    def config_hash(self) -> str:
        """Stable 8-hex digest of the settings that change the result (not where it is written).

        Only settings that differ from their defaults enter it, so adding a field with a default
        that keeps today's behaviour leaves every existing run id (and sweep resume) unchanged.
        """
        defaults = RunConfig.__dataclass_fields__
        d = {
            k: v
            for k, v in self.to_dict().items()
            if k not in ("results_dir", "run_id", "progress", "log_every", "data_root")
            and v != defaults[k].default
        }
        blob = json.dumps(d, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:8]

    def resolved_run_id(self) -> str:
        return self.run_id or f"{self.model}-{self.optimizer}-b{self.batch_size}-{self.config_hash()}"

    def data_path(self) -> Path:
        return resolve_path(self.data_root)

    def run_dir(self) -> Path:
        return output_path(self.results_dir) / self.task / self.resolved_run_id()


# every integer setting has a range: past it no real run exists, and a huge value would crash in the kernel
INT_RANGES = {
    "batch_size": (1, 1 << 20),
    "epochs": (1, 100_000),
    "log_every": (1, 1 << 30),
    "max_batches": (0, 1 << 40),
    "subset": (0, 1 << 40),
    "num_workers": (0, 1024),
    "seed": (0, 2**32 - 1),
    "checkpoint_segments": (0, 1024),
}
NAME_RULE = "letters, digits, '_', '-', '.' and '+', not starting with '.' or '-', at most 100 characters"


def _plain_name(name: str) -> bool:
    """A folder name every tool shows and finds: no separators, control characters, leading dot (hidden
    folders are attempts, invisible to load_runs) or '..', nothing a shell or Slurm reads as an option."""
    return (
        0 < len(name) <= 100
        and name.isascii()
        and all(c.isalnum() or c in "_-.+" for c in name)
        and not name.startswith((".", "-"))
        and ".." not in name
        and name == name.strip()
    )


def check_keys(
    params: Mapping[str, Any] | Iterable[str],
    also: Iterable[str] = (),
    where: str = "",
    shown: Iterable[str] | None = None,
) -> None:
    """The one check for unknown parameter names: each key must be a RunConfig field or one of `also` (a
    study's settings); else one line naming it (`where`, e.g. " for task c1") and the valid names (`shown`, or
    all)."""
    valid = [*RunConfig.field_names(), *also]
    for key in params:
        if key not in valid:
            raise ConfigError(
                f"unknown parameter {_short(key)}{where}; valid parameters: {', '.join(shown or valid)}"
            )


def project_root() -> Path:
    """The checkout's root (the folder with pyproject.toml), else HPML_LAB_HOME, else cwd.

    Notebooks run from notebooks/ in JupyterLab and from the root under the
    runner; resolving relative paths here makes both find the same data.
    """
    env = os.environ.get("HPML_LAB_HOME")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if (p / "pyproject.toml").is_file() and (p / "hpml_lab").is_dir():
            return p
    return here


def home_expanded(path: str | os.PathLike) -> Path:
    """`path` with a leading ~ or ~user expanded; a user that does not exist is one ConfigError line (pathlib
    raises RuntimeError), not a traceback."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        raise ConfigError(
            f"{str(path).split('/')[0]!r} in {str(path)!r} names no user of this machine; give a path"
        ) from None


def resolve_path(path: str | os.PathLike) -> Path:
    p = home_expanded(path)
    return p if p.is_absolute() else project_root() / p


def output_path(path: str | os.PathLike) -> Path:
    """Where generated files go: results/, reports/, figures/ under HPML_OUTPUT_DIR if set
    (tests and batch jobs point it elsewhere), else under the project root."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    base = os.environ.get("HPML_OUTPUT_DIR")
    return (Path(base).resolve() if base else project_root()) / p
