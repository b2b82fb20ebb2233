"""The data a task needs, made where the quick start expects it: a task run on the default data folder
(`data/`, the notebooks' own `data_root`) where its dataset is missing writes the synthetic one there first
and says so in one line, as `hpml-lab data synth` would; the real data stays an explicit command (`hpml-lab
data download`), and a data_root the user gave that lacks the data is refused in one line before any compute
(check_dataset).

    kind = dataprep.ready(cfg, given_root=False)   # 'synthetic' or 'real'; writes a missing data/ first
    dataprep.synthesize("cifar10", root)            # `hpml-lab data synth cifar10`: a line every 20 s or less
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..config import RunConfig, resolve_path
from ..data import check_dataset, cifar, tinyimagenet
from ..ticker import duration, ticking

DEFAULT_ROOT = "data"  # every notebook's data_root: where `make data` and the quick start put the datasets
NAMES = {"cifar10": "CIFAR-10", "tinyimagenet": "Tiny ImageNet"}


def synthesize(dataset: str, root: Path, say: Callable[[str], None] = print, **options) -> Path:
    """The synthetic `dataset` written under `root` (the options of cifar.synthesize or
    tinyimagenet.synthesize), with a line as each part is written and at least every 20 s, then one saying
    what was written where."""
    t0 = time.monotonic()
    with ticking(f"data synth {dataset}", say=say) as t:
        if dataset == "cifar10":
            path = cifar.synthesize(root, progress=t.done, **options)
            n_train, n_test = options.get("n_train", 50_000), options.get("n_test", 10_000)
            what = f"CIFAR-10 ({n_train} train + {n_test} test, seed {options.get('seed', 0)})"
        else:
            path = tinyimagenet.synthesize(root, progress=t.done, log=say, **options)
            what = (
                f"Tiny ImageNet ({options.get('classes', 200)} classes x {options.get('per_class', 10)} "
                f"train, {options.get('val_per_class', 2)} val each, seed {options.get('seed', 0)})"
            )
    say(f"wrote synthetic {what} to {path} in {duration(time.monotonic() - t0)}")
    return path


def missing(cfg: RunConfig) -> bool:
    """Nothing of cfg's dataset is in its folder (a damaged or half-prepared copy is not missing:
    check_dataset names it)."""
    root = cfg.data_path()
    if cfg.dataset == "cifar10":
        return not (root / cifar.FOLDER).exists()
    if cfg.dataset == "tinyimagenet":
        return not (root / tinyimagenet.FOLDER).exists() and not (root / tinyimagenet.ARCHIVE).exists()
    return False


def ready(cfg: RunConfig, given_root: bool, say: Callable[[str], None] = print) -> str:
    """check_dataset(cfg), after writing the synthetic dataset into the default folder where it is missing and
    the user named no data_root (given_root). Returns 'real' or 'synthetic'; DatasetError otherwise."""
    default = resolve_path(DEFAULT_ROOT)
    if not given_root and cfg.data_path() == default and missing(cfg):
        from ..data.checks import one_data_command

        name = NAMES.get(cfg.dataset, cfg.dataset)
        with one_data_command(default):
            if missing(cfg):  # another command may have written it while this one waited
                say(
                    f"data: no {name} in {DEFAULT_ROOT}/ (the default data folder): writing a synthetic one "
                    f"there first, as `hpml-lab data synth {cfg.dataset}` does (the real one: `hpml-lab "
                    f"data download {cfg.dataset} --root {DEFAULT_ROOT}`)"
                )
                synthesize(cfg.dataset, default, say)
    return check_dataset(cfg)
