"""The data-loading study: one image per file, simulated storage latency, four ways to load batches.

    hpml-lab run dataloading                       # notebooks/dataloading.ipynb, smoke profile
    from hpml_lab.studies.dataloading.study import study
    rows, meta = study(cfg, latencies_ms=(0, 5, 20, 50))

After "Profiling and improving the PyTorch DataLoader for high-latency storage" (Svogor et al.,
arXiv 2211.04908): when every file read waits on storage (object stores, network file systems),
a DataLoader worker spends its time sleeping on I/O, one file at a time. The study writes CIFAR-10
training images as PNG files, adds a fixed latency to every file open (time.sleep: waiting, not
CPU work, as on remote storage) and measures, per latency:

- baseline: the lab's DataLoader over the files, cfg.num_workers workers;
- more workers: 4x as many worker processes;
- threads: the baseline's workers, each fetching its batch's files concurrently with a thread
  pool (the paper's idea, through Dataset.__getitems__, which the DataLoader calls per batch);
- tensor-resident: every file read once (concurrently) into one uint8 tensor on the device,
  then hpml_lab.data.gpu_loader.TensorLoader; its one-time load is reported separately.

Per configuration: cfg.epochs full passes over the files, each from a fresh iterator (worker
start-up inside, as in a training epoch), with nothing but loading in the loop, so the pass time is
the loader's own epoch time: images/s = files / median pass time, batch loading time = pass time /
batches, spread over passes; the first batch's wait (start-up and pipeline fill) is also reported.
Rows go to results/dataloading/<run-id>/loading.csv.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset

from ... import results
from ...data import cifar_files, lab_transform, worker_init
from ...data.gpu_loader import TensorLoader
from ...io import atomic_write_csv
from ...profiling import WallClock, summarize

LATENCIES_MS = (0, 5, 20, 50)
THREADS = 8  # concurrent file fetches per worker (threads configuration)
PRELOAD_THREADS = 32  # concurrent fetches for the one-time load of the tensor-resident loader
COLUMNS = [
    "latency_ms",
    "loader",
    "workers",
    "threads",
    "batch_size",
    "files",
    "passes",
    "epoch_s",
    "epoch_q1_s",
    "epoch_q3_s",
    "epoch_min_s",
    "epoch_max_s",
    "batch_s",
    "first_batch_s",
    "wait_median_s",
    "wait_iqr_s",
    "images_per_s",
    "one_time_s",
    "pass_times_s",
]


def write_image_files(images: np.ndarray, labels: Sequence[int], folder: str | os.PathLike) -> list[Path]:
    """One PNG per image, named <index>_<label>.png (lossless, so decoded pixels equal the source)."""
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (img, y) in enumerate(zip(images, labels)):
        p = folder / f"{i:06d}_{int(y)}.png"
        Image.fromarray(img).save(p, format="PNG", compress_level=1)
        paths.append(p)
    return paths


class FileImageDataset(Dataset):
    """Images stored one per file; every open waits `latency_s` first (simulated storage latency)."""

    def __init__(self, paths: Sequence[Path], latency_s: float = 0.0, transform=None):
        self.paths = [Path(p) for p in paths]
        self.labels = [int(p.stem.split("_")[1]) for p in self.paths]
        self.latency_s = latency_s
        self.transform = transform if transform is not None else lab_transform(True)

    def __len__(self) -> int:
        return len(self.paths)

    def read(self, i: int) -> bytes:
        if self.latency_s:
            time.sleep(self.latency_s)  # the storage's latency: the thread waits, the CPU is free
        return self.paths[i].read_bytes()

    def decode(self, i: int) -> np.ndarray:
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(self.read(i))).convert("RGB"))

    def __getitem__(self, i: int):
        from PIL import Image

        return self.transform(Image.fromarray(self.decode(i))), self.labels[i]


class ThreadedFileDataset(FileImageDataset):
    """The same files, with each batch's files fetched concurrently by a per-process thread pool.

    The DataLoader calls __getitems__(indices) once per batch when a dataset defines it; the pool is
    created lazily in each worker process (after fork), never pickled.
    """

    def __init__(self, paths, latency_s: float = 0.0, transform=None, threads: int = THREADS):
        super().__init__(paths, latency_s, transform)
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pid = -1

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_pool=None, _pid=-1)
        return state

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None or self._pid != os.getpid():
            self._pool, self._pid = ThreadPoolExecutor(self.threads), os.getpid()
        return self._pool

    def __getitems__(self, indices: Sequence[int]) -> list:
        return list(self._executor().map(self.__getitem__, indices))


def preload(ds: FileImageDataset, threads: int = PRELOAD_THREADS) -> tuple[np.ndarray, list[int]]:
    """Read and decode every file once, concurrently: the tensor-resident loader's one-time cost."""
    with ThreadPoolExecutor(threads) as pool:
        images = list(pool.map(ds.decode, range(len(ds))))
    return np.stack(images), list(ds.labels)


def time_passes(loader, passes: int, device: torch.device) -> list[dict[str, float]]:
    """Full passes over the loader, each from a fresh iterator (worker start-up included, as in a
    training epoch without persistent workers): the pass's time, its first batch's wait, and every wait."""
    out = []
    for _ in range(passes):
        pass_clock, batch_clock = WallClock(device), WallClock(device)
        waits = []
        pass_clock.start()
        batch_clock.start()
        for _batch in loader:
            waits.append(batch_clock.stop())
            batch_clock.start()
        out.append({"epoch_s": pass_clock.stop(), "first_batch_s": waits[0], "waits": waits})
    return out


def _row(latency_ms, name, workers, threads, batch_size, n_files, passes, one_time=0.0) -> dict[str, Any]:
    epoch = summarize([p["epoch_s"] for p in passes])
    later = [w for p in passes for w in p["waits"][1:]]  # waits after the first batch of each pass
    return {
        "latency_ms": latency_ms,
        "loader": name,
        "workers": workers,
        "threads": threads,
        "batch_size": batch_size,
        "files": n_files,
        "passes": len(passes),
        "epoch_s": epoch["median"],
        "epoch_q1_s": epoch["q1"],
        "epoch_q3_s": epoch["q3"],
        "epoch_min_s": epoch["min"],
        "epoch_max_s": epoch["max"],
        "batch_s": epoch["median"] / len(passes[0]["waits"]),
        "first_batch_s": summarize([p["first_batch_s"] for p in passes])["median"],
        "wait_median_s": summarize(later)["median"],
        "wait_iqr_s": summarize(later)["iqr"],
        "images_per_s": n_files / epoch["median"],
        "one_time_s": one_time,
        "pass_times_s": ";".join(f"{p['epoch_s']:.6f}" for p in passes),
    }  # the samples verdicts compare


def study(
    cfg,
    latencies_ms: Sequence[float] = LATENCIES_MS,
    threads: int = THREADS,
    more_workers: int | None = None,
    log=print,
    write: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Measure the four loaders at each latency; returns (rows, meta) and writes them under cfg.run_dir().

    cfg fields used: data_root, subset (number of files; 0 means 2048), batch_size, epochs (passes per
    configuration), num_workers (baseline), device, seed.
    """
    from ...device import resolve_device

    if cfg.dataset != "cifar10":
        from ...config import ConfigError

        raise ConfigError(
            f"the data-loading study writes its files from CIFAR-10; dataset {cfg.dataset!r} is not supported"
        )
    device = resolve_device(cfg.device)
    src = cifar_files.CIFAR10Files(cfg.data_path(), train=True)
    n_files = min(cfg.subset or 2048, len(src))
    b = cfg.batch_size
    if n_files < 2 * b:
        from ...config import ConfigError

        raise ConfigError(f"parameter 'subset' ({n_files} files) must hold at least two batches of {b}")
    passes = cfg.epochs
    if not cfg.run_id:  # name the run for what it measures, not for a model it does not train
        cfg = cfg.replace(run_id=f"files{n_files}-b{b}-w{cfg.num_workers}-{cfg.config_hash()}")
    workers = cfg.num_workers
    more = more_workers if more_workers is not None else 4 * max(workers, 1)
    run_dir = cfg.run_dir()
    meta: dict[str, Any] = results.new_meta(
        cfg,
        device,
        **{
            "run_dir": str(run_dir),
            "files": n_files,
            "latencies_ms": list(latencies_ms),
            "threads": threads,
            "more_workers": more,
            "preload_threads": PRELOAD_THREADS,
            "passes": passes,
            # what the verdicts read to know their samples were taken in turns (a record without it, from
            # before the loaders took turns, is read as not saying how)
            "passes_in_turns": True,
            "timing_note": (
                "per configuration, `epochs` full passes over the files, the file-based loaders taking turns "
                "pass by pass (interleaved), each pass from a fresh iterator, so worker start-up is inside "
                "every pass as in a training epoch; the first batch's wait is also reported alone; the "
                "tensor-resident loader's one-time load is reported apart (one_time_s), and on CPU its "
                "passes run with one torch thread, as a DataLoader worker does; synchronized wall clocks "
                "(hpml_lab.profiling.WallClock)"
            ),
        },
    )
    rows: list[dict[str, Any]] = []
    base = Path(tempfile.mkdtemp(prefix="dataloading-files-"))
    # The run lifecycle (results.RunFolder): an attempt folder, landed only when complete, so a rerun that
    # fails or is interrupted never overwrites a complete study; SIGTERM ends it as interrupted.
    folder = results.RunFolder(run_dir) if write else contextlib.nullcontext()
    with results.sigterm_interrupts(), folder as rf:
        if write:
            rf.write_meta(meta)
        try:
            t0 = time.perf_counter()
            paths = write_image_files(src.data[:n_files], src.targets[:n_files], base)
            meta["write_files_s"] = time.perf_counter() - t0
            gen = lambda: torch.Generator().manual_seed(cfg.seed)  # noqa: E731 (same order for every loader)
            for lat in latencies_ms:
                s = lat / 1000.0
                plain = FileImageDataset(paths, s)
                threaded = ThreadedFileDataset(paths, s, threads=threads)
                configs = [
                    ("baseline", plain, workers, 1),
                    ("more workers", plain, more, 1),
                    ("threads", threaded, workers, threads),
                ]
                loaders = {}
                with warnings.catch_warnings():  # more workers than cores is the point of the comparison
                    warnings.filterwarnings("ignore", message="This DataLoader will create")
                    for name, ds, w, _t in configs:
                        loaders[name] = DataLoader(
                            ds,
                            batch_size=b,
                            shuffle=True,
                            num_workers=w,
                            generator=gen(),
                            pin_memory=device.type == "cuda",
                            worker_init_fn=worker_init,
                        )
                    # the batches each worker keeps in flight: the DataLoader's own (its loaders with workers)
                    meta["prefetch_factor"] = loaders["more workers"].prefetch_factor
                    # The loaders take turns pass by pass (A B C A B C ...), so a change in the machine's load
                    # hits them alike and each verdict between them compares interleaved samples.
                    got: dict[str, list] = {name: [] for name, *_ in configs}
                    for k in range(passes):
                        for name, *_ in configs[k % len(configs) :] + configs[: k % len(configs)]:
                            got[name] += time_passes(loaders[name], 1, device)
                for name, _ds, w, t in configs:
                    rows.append(_row(lat, name, w, t, b, n_files, got[name]))
                    log(
                        f"[dataloading] {lat:g} ms, {name} ({w} workers x {t} threads): "
                        f"{rows[-1]['images_per_s']:.0f} img/s"
                    )
                clock = WallClock(device)
                clock.start()
                images, labels = preload(plain)
                tl = TensorLoader(images, labels, b, device, seed=cfg.seed)
                once = clock.stop()
                # Its passes take milliseconds: more of them for a stable median (the passes column says how
                # many). On CPU with one torch thread, as each DataLoader worker has: fair, and immune to the
                # stalls of multi-threaded tiny ops on an oversubscribed machine.
                threads_before = torch.get_num_threads()
                if device.type == "cpu":
                    torch.set_num_threads(1)
                try:
                    tr_passes = time_passes(tl, max(passes, 10), device)
                finally:
                    torch.set_num_threads(threads_before)
                rows.append(_row(lat, "tensor-resident", 0, PRELOAD_THREADS, b, n_files, tr_passes, once))
                log(
                    f"[dataloading] {lat:g} ms, tensor-resident: {rows[-1]['images_per_s']:.0f} img/s "
                    f"after a one-time load of {once:.2f} s"
                )
                if write:  # after every latency, so an interrupted study keeps what it measured
                    atomic_write_csv(rf.path / "loading.csv", rows, COLUMNS)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        meta["status"] = "complete"
        if write:
            atomic_write_csv(rf.path / "loading.csv", rows, COLUMNS)
            rf.complete(meta)
    return rows, meta


ORDER = ["baseline", "more workers", "threads", "tensor-resident"]
FILE_BASED = ("baseline", "more workers", "threads")


def sleep_floor(files: int, batch: int, workers: int, at_once: int, latency_s: float) -> float:
    """The least time the storage's sleeps alone take in one pass: the batches go to the workers in turn
    (batch k to worker k mod workers; all to the training process without workers), each batch's files read
    in rounds of `at_once`; the busiest worker's sleeps."""
    sizes = [min(batch, files - start) for start in range(0, files, batch)]
    n = max(workers, 1)
    return max(sum(-(-size // at_once) for size in sizes[k::n]) for k in range(n)) * latency_s


def concurrency(df, prefetch_factor: int) -> pd.DataFrame:
    """Per file-based row, from its settings: the files it reads at once (each worker, or the training process
    without workers, reads one file at a time, or `threads` of its batch's files at once), the batches in
    flight (workers x prefetch_factor; one without workers), and the floor the storage's sleeps alone set on a
    pass (sleep_floor). The tensor-resident loader reads no file in a pass (its one-time load aside): not
    counted."""
    rows = []
    for _, r in df[df["loader"].isin(FILE_BASED)].iterrows():
        w, b = int(r["workers"]), int(r["batch_size"])
        at_once = min(int(r["threads"]), b)
        rows.append(
            {
                "latency_ms": r["latency_ms"],
                "loader": r["loader"],
                "files at once": max(w, 1) * at_once,
                "batches in flight": w * prefetch_factor if w > 0 else 1,
                "sleep floor (s)": sleep_floor(int(r["files"]), b, w, at_once, float(r["latency_ms"]) / 1000),
            }
        )
    return pd.DataFrame(rows)


def pass_times(row) -> list[float]:
    """The timed passes behind one row (seconds each)."""
    return [float(x) for x in str(row["pass_times_s"]).split(";") if x]


def with_load(df):
    """Per-pass seconds of the tensor-resident loader with its one-time load spread over the passes run."""
    tr = df[df.loader == "tensor-resident"].copy()
    tr["epoch_s"] = tr["epoch_s"] + tr["one_time_s"] / tr["passes"]
    tr["images_per_s"] = tr["files"] / tr["epoch_s"]
    tr["loader"] = "tensor-resident incl. load"
    return tr


def speedups(df):
    """images/s of each loader relative to the baseline at the same latency (latency x loader); the
    tensor-resident loader twice: per pass alone, and with its one-time load spread over the passes run."""
    full = pd.concat([df, with_load(df)], ignore_index=True)
    wide = full.pivot(index="latency_ms", columns="loader", values="images_per_s")
    cols = [c for c in ORDER + ["tensor-resident incl. load"] if c in wide]
    return wide[cols].div(wide["baseline"], axis=0)
