"""Four of the measurements behind `hpml-lab bench` (loader, step, overhead, stall; profile is
bench_profile.py), each a function of the options and the device that returns its result object, and the
trainer and configurations they share; bench.py checks the options, runs one and saves what it returns.

    from hpml_lab.studies import bench_measure
    bench_measure.bench_step(opts, device)   # opts: bench.Settings as a dict, completed by bench.run

Compared variants take turns (profiling.interleaved_timed), so slow drift of a shared machine hits them alike;
the headline ratio is a ratio of medians, and per-round ratios give its spread. Timing goes through
hpml_lab.profiling (synchronized wall clocks; CUDA events inside train()).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .. import flops
from ..config import ConfigError, RunConfig
from ..data import build_loader, cifar_files, lab_transform
from ..device import configure as configure_device
from ..device import seed_everything, torch_threads
from ..profiling import HostTimer, StepClock, WallClock, interleaved_timed, summarize, synchronize
from ..step import Step, build_model, build_optimizer
from ..verdict import MIN_SAMPLES, compare, target_met

TARGETS = {
    "loader": "tensor augmentation >= 10x PIL images/s per core (2 CPU cores)",
    "overhead": "instrumented step time <= 1.02x plain",
    "stall": "fast path: data wait <= 5% of step time (one H100)",
}


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def fast_overrides(
    device: torch.device,
    precision: str | None = None,
    compile: bool | None = None,
    channels_last: bool | None = None,
) -> dict[str, Any]:
    """The fast path's RunConfig fields; None picks by device. On CUDA every option (precision bf16, the whole
    step compiled and replayed as CUDA graphs); on CPU the tensor-resident loader only, unless asked: bf16
    autocast is slower on CPUs without bf16 units, channels_last was no clear win for fp32 on the 2-core
    development machine, and compilation costs minutes there."""
    on_gpu = device.type == "cuda"
    pick = lambda v: on_gpu if v is None else v  # noqa: E731
    return {
        "loader": "tensor",
        "persistent_workers": True,
        "channels_last": pick(channels_last),
        "precision": precision or ("bf16" if on_gpu else "fp32"),
        "compile": pick(compile),
        "compile_mode": "reduce-overhead" if on_gpu else "default",
    }


def fast_cfg(base: RunConfig, opts: dict[str, Any], device: torch.device, **changes: Any) -> RunConfig:
    """The baseline with the fast path's fields (opts' precision, compile, channels_last; None: by device)."""
    return base.replace(
        **changes,
        **fast_overrides(device, opts.get("precision"), opts.get("compile"), opts.get("channels_last")),
    )


class Trainer:
    """The training step of hpml_lab.training.train (step.Step, compiled whole as train() compiles it),
    without its bookkeeping, for timing."""

    def __init__(self, cfg: RunConfig, device: torch.device):
        self.cfg, self.device = cfg, device
        configure_device(device)  # as train() runs: cuDNN autotuning on CUDA, absorbed by the warm-up
        seed_everything(cfg.seed)
        self.model = build_model(cfg, device, compile=False)
        self.model.train()
        self.optimizer = build_optimizer(cfg, self.model.parameters())
        self.criterion = nn.CrossEntropyLoss()
        self._step = Step(self.model, self.optimizer, self.criterion, cfg, device, compile=cfg.compile)
        self.loader = build_loader(cfg, device)
        self._it = None

    def next_batch(self):
        """Next full batch, starting the next epoch when one ends. An epoch's smaller last batch is skipped
        when the epoch has full ones: a step on fewer images is not the step timed, and under torch.compile
        its new shape would be compiled inside a timed repeat. (Fetching the skipped batch counts toward the
        next one's data wait in `bench stall`: once an epoch.)"""
        full, last = getattr(self.loader, "batch_size", None) or self.cfg.batch_size, None
        for _ in range(3):  # at most: the rest of this epoch, then a fresh one
            if self._it is None:
                self._it = iter(self.loader)
            for batch in self._it:
                if len(batch[0]) == full:
                    return batch
                last = batch
            self._it = None
        if last is None:
            raise RuntimeError("the benchmark's loader yields no batch (an empty dataset?)")
        return last  # the dataset is smaller than one batch: its only batch

    def step(self, x, y):
        """One step: (loss, correct) on the device."""
        return self._step(x, y)

    def warm_last(self) -> None:
        """One untimed step at the shape of an epoch's partial last batch, where the loader gives one, so that
        its first meeting (cuDNN's kernel search on a GPU, the allocator's growth) falls in a warm-up, not in
        a timed whole epoch (grade40g: the H200's PIL baseline's first whole epoch took 6.50 s against 4.34
        and 4.59 s, its last batch of 80 images met for the first time; the rounds take full batches only)."""
        if getattr(self.loader, "drop_last", True) is not False:
            return
        try:
            n = len(self.loader.dataset)
        except (TypeError, AttributeError):  # a loader without a sized dataset (the tensor loader's)
            return
        rest = n % (getattr(self.loader, "batch_size", None) or self.cfg.batch_size)
        if rest:
            x, y = self.next_batch()
            self._step(x[:rest], y[:rest])

    def epoch(self) -> int:
        """One whole epoch of the loader from its start (every batch it gives, a PIL loader's partial last
        batch included; the tensor loader gives full ones), as train() runs it: the images it carried."""
        self._it, n = None, 0
        for x, y in self.loader:
            self._step(x, y)
            n += len(y)
        return n

    def close(self) -> None:
        self._it = None


def base_cfg(opts: dict[str, Any], device: torch.device) -> RunConfig:
    """The baseline: the lab's defaults (ResNet-18, batch 128, fp32 weights (TF32 convolutions on CUDA,
    torch's default), NCHW, PIL loader, 2 workers)."""
    params = {
        "task": "bench",
        "data_root": opts["data_root"],
        "device": device.type,
        "progress": "none",
        "model": opts["model"],
        "batch_size": opts["batch_size"],
        "num_workers": opts["num_workers"],
    }
    return RunConfig(**params)


# ------------------------------------------------------------------ benchmarks
def bench_loader(opts: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Images/s on ONE core: the lab's per-sample PIL pipeline (decode, crop, flip, to float, normalise,
    collate: what a DataLoader worker does) vs TensorLoader's batched augmentation, both on the CPU."""
    from PIL import Image

    ds = cifar_files.CIFAR10Files(opts["data_root"], train=True)
    b = opts["batch_size"]
    if b > len(ds):  # a batch larger than the dataset: no batch at all (it was a StopIteration traceback)
        raise ConfigError(
            f"--batch-size {b:,} is larger than the {len(ds):,} training images in {opts['data_root']}; "
            f"use {len(ds):,} or fewer"
        )
    tf = lab_transform(True)
    pil_images = b * opts["pil_batches"]
    tensor_batches = opts["tensor_batches"]
    tloader = fastpath_tensor_loader(ds, b, torch.device("cpu"))
    rng = torch.Generator().manual_seed(0)

    def pil_run():
        idx = torch.randint(0, len(ds), (pil_images,), generator=rng).tolist()
        for s in range(0, pil_images, b):
            torch.stack([tf(Image.fromarray(ds.data[i])) for i in idx[s : s + b]])

    def tensor_run():
        _take(tloader, tensor_batches)

    with torch_threads(1):
        pil_s, tensor_s = _interleaved(
            [pil_run, tensor_run], torch.device("cpu"), opts["repeats"], opts["warmup"]
        )
    pil_rate = [pil_images / t for t in pil_s]
    tensor_rate = [tensor_batches * b / t for t in tensor_s]
    ratios = [t / p for t, p in zip(tensor_rate, pil_rate)]
    out: dict[str, Any] = {
        "unit": "images/s on one core (torch threads = 1, no worker processes)",
        "pil_images_per_s": summarize(pil_rate),
        "tensor_images_per_s": summarize(tensor_rate),
        "ratio": summarize(ratios)["median"],
        "ratio_spread": summarize(ratios),
        "target": TARGETS["loader"],
        # met only when the whole 95% interval of the ratio clears 10x; None when the run cannot tell
        "meets_target": target_met(
            compare(  # the two loaders took turns (_interleaved)
                tensor_rate,
                pil_rate,
                "tensor",
                "PIL",
                lower_is_better=False,
                what="images/s per core",
                interleaved=True,
                paired=True,
            ),
            10.0,
            at_least=True,
        ),
        "images_per_repeat": {"pil": pil_images, "tensor": tensor_batches * b},
    }
    if device.type == "cuda":  # the same loader resident on the GPU: not per core, stated separately
        gl = fastpath_tensor_loader(ds, b, device)

        def gpu_run():
            _take(gl, tensor_batches)

        gpu_s = _interleaved([gpu_run], device, opts["repeats"], opts["warmup"])[0]
        out["tensor_images_per_s_on_device"] = summarize([tensor_batches * b / t for t in gpu_s])
    return out


def _take(loader, n: int) -> None:
    """Draw n batches from loader, starting another epoch when one ends (a small dataset has fewer batches
    per epoch than a benchmark asks for)."""
    it = iter(loader)
    for _ in range(n):
        try:
            next(it)
        except StopIteration:
            it = iter(loader)
            next(it)


def fastpath_tensor_loader(ds, batch_size: int, device: torch.device):
    from ..data.gpu_loader import TensorLoader

    return TensorLoader(ds.data, ds.targets, batch_size, device, seed=0)


def bench_step(opts: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Seconds per training step (data + copy + forward + backward + update, back to back, no per-step
    synchronization), baseline vs fast path, timed as whole runs of `steps` steps."""
    base = base_cfg(opts, device)
    fast = fast_cfg(base, opts, device)
    rows = {}
    trainers = {}
    for name, cfg in (("baseline", base), ("fast", fast)):
        trainers[name] = Trainer(cfg, device)
    fns = []
    for name in ("baseline", "fast"):
        tr = trainers[name]
        fns.append(lambda tr=tr: [tr.step(*tr.next_batch()) for _ in range(opts["steps"])])
    times = _interleaved(fns, device, opts["repeats"], opts["warmup"])
    for name, ts in zip(("baseline", "fast"), times):
        rows[name] = summarize([t / opts["steps"] for t in ts])
    ratios = [b / f for b, f in zip(times[0], times[1])]
    for tr in trainers.values():
        tr.close()
    per_image = flops.flops_per_image(base)
    achieved = {}
    # The baseline's steps wait on the PIL loader (2 workers): an MFU of them would measure the loader. It
    # gets throughput only; MFU is the fast path's (device-resident tensor loader).
    achieved["baseline"] = {
        "images_per_s": base.batch_size / rows["baseline"]["median"],
        "mfu": None,
        "precision": flops.precision_of(base, device),
        "note": "loader-bound steps (PIL loader): throughput, not MFU",
    }
    for name, cfg in (("fast", fast),):
        pk = flops.peak(device, flops.precision_of(cfg, device), flops.peaks_path(cfg.results_dir))
        step_flops = per_image * cfg.batch_size
        achieved[name] = {
            "tflops": flops.tflops(step_flops, rows[name]["median"]),
            "precision": pk.precision,
            "peak_tflops": pk.tflops,
            "peak_source": pk.source,
            "mfu": flops.mfu(step_flops, rows[name]["median"], pk.tflops),
            # the epoch at the peak: how far this path is from the hardware's limit
            "ideal_epoch_s": per_image * 50_000 / (pk.tflops * 1e12),
            "epoch_s_at_this_rate": 50_000 / cfg.batch_size * rows[name]["median"],
        }
    return {
        "unit": "seconds per step",
        "baseline_step_s": rows["baseline"],
        "fast_step_s": rows["fast"],
        "flops_per_image": per_image,
        "achieved": achieved,
        "ratio": summarize(ratios)["median"],
        "ratio_spread": summarize(ratios),
        "ratio_meaning": "baseline step time / fast step time (speedup)",
        "baseline_config": cfg_fields(base),
        "fast_config": cfg_fields(fast),
        "images_per_s": {
            "baseline": base.batch_size / rows["baseline"]["median"],
            "fast": fast.batch_size / rows["fast"]["median"],
        },
    }


def bench_overhead(opts: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """What train()'s instrumentation costs a step of the fast configuration (on CUDA: the tensor loader's
    batch, channels_last, bf16, the whole step compiled with CUDA graphs; the shortest step the kit times, so
    where instrumentation weighs most), on a fixed, device-resident batch, the loop keeping each step's loss
    and correct count on the device as train() does. Four variants in interleaved rounds: plain (no clock);
    train()'s fast-path instrumentation (a host clock around each fetch, device events only every log_every
    steps: its default on the tensor loader); the baseline path's (an event pair around every step); and that
    with a per-step synchronize (sync_each_step=True). Ratio = median fast-path instrumented / median plain;
    the per-round ratios give the spread; the other two are reported beside it."""
    cfg = fast_cfg(base_cfg(opts, device), opts, device, num_workers=0)
    tr = Trainer(cfg, device)
    x, y = tr.next_batch()
    xb, yb = x.to(device), y.to(device)
    steps = opts["steps"]
    every = cfg.log_every

    def plain():
        kept = []
        for _ in range(steps):
            kept.append(tr.step(xb, yb))

    def make(per_step: bool, sync: bool):
        def run():
            wait, work, kept = HostTimer(), StepClock(device, every=0 if per_step else every), []
            work.begin()
            for _ in range(steps):
                wait.start()
                batch = (xb, yb)
                wait.stop()
                work.step_start()
                kept.append(tr.step(*batch))
                work.step_stop()
                if sync:
                    synchronize(device)
            work.end()
            work.step_times()  # reading the events is part of the cost

        return run

    rounds = (
        3 * opts["repeats"]
    )  # short interleaved rounds: on a shared machine the noise is larger than the effect
    plain_s, fast_s, each_s, sync_s = _interleaved(
        [plain, make(False, False), make(True, False), make(True, True)], device, rounds, opts["warmup"]
    )
    r_fast = [a / b for a, b in zip(fast_s, plain_s)]
    # Ratio of medians: robust to the sporadic interference of a shared machine; per-round ratios give the
    # spread.
    ratio = summarize(fast_s)["median"] / summarize(plain_s)["median"]
    # The instrumentation's own cost, timed in a tight loop without the step: precise where the A/B ratio is
    # noisy. (On CUDA a per-step synchronize would also cost lost overlap, which only ratio_with_step_sync
    # sees.)
    n = 2000
    clock = WallClock(device)
    costs = {}
    for name, per_step in (("fast", False), ("per_step", True)):
        wait, work = HostTimer(), StepClock(device, every=0 if per_step else every)
        clock.start()
        work.begin()
        for _ in range(n):
            wait.start()
            wait.stop()
            work.step_start()
            work.step_stop()
        work.end()
        work.step_times()
        costs[name] = clock.stop() / n
    plain_median = summarize([t / steps for t in plain_s])["median"]
    # The target (instrumented <= 1.02 x plain) is met only when the 95% interval of the ratio lies under
    # 1.02, missed only when it lies wholly above; otherwise this run cannot resolve 2% and says so (None).
    v = compare(
        plain_s, fast_s, "plain", "instrumented", what="step time", interleaved=True, paired=True
    )  # rounds took turns
    met = target_met(v, 1.02, at_least=False)
    return {
        "unit": "seconds per step",
        "rounds": rounds,
        "log_every": every,
        "plain_step_s": summarize([t / steps for t in plain_s]),
        "instrumented_step_s": summarize([t / steps for t in fast_s]),
        "per_step_events_step_s": summarize([t / steps for t in each_s]),
        "synchronized_step_s": summarize([t / steps for t in sync_s]),
        "ratio": ratio,
        "ratio_spread": summarize(r_fast),
        "ratio_per_step_events": summarize(each_s)["median"] / summarize(plain_s)["median"],
        "ratio_with_step_sync": summarize(sync_s)["median"] / summarize(plain_s)["median"],
        "overhead_percent": 100 * (ratio - 1),
        "target": TARGETS["overhead"],
        "meets_target": met,
        "instrumentation_cost_s_per_step": costs["fast"],
        "per_step_events_cost_s_per_step": costs["per_step"],
        "direct_overhead_percent": 100 * costs["fast"] / plain_median,
        # Fastest repeat of each: the least disturbed by other processes (timeit's estimator).
        "ratio_of_minimums": min(fast_s) / min(plain_s),
        # Can this run resolve a 2% effect at all? Only if the per-round ratios scatter less than that.
        "conclusive": met is not None,
        "verdict": v.as_dict(),
        "note": (
            "'instrumented' = train()'s fast-path timing (host clock per fetch, device events every "
            "log_every steps, no synchronize); ratio_per_step_events = the baseline path's event pair "
            "around every step; ratio_with_step_sync adds sync_each_step=True's synchronize (a no-op on CPU)"
        ),
        "step": tr._step.describe(),
        "config": cfg_fields(cfg),
    }


def bench_stall(opts: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Share of training time lost to data, baseline vs fast path: `steps` steps fed by the loader, run as
    training runs them when it does not split data from compute (no synchronize between steps, so the loader's
    work overlaps the device's as it can), against the same steps on one batch already resident on the device,
    in interleaved rounds. Stall = 1 - resident time / fed time, per round (the host-to-device copy counts as
    data here; the loader's prefetched batches carry over between rounds, a few against `steps`).
    Synchronizing around each fetch instead would serialise what overlaps in real training."""
    base = base_cfg(opts, device)
    fast = fast_cfg(base, opts, device)
    out: dict[str, Any] = {"unit": "share of step time lost to data loading (0..1)"}
    steps = opts["steps"]
    for name, cfg in (("baseline", base), ("fast", fast)):
        tr = Trainer(cfg, device)
        resident = tuple(t.to(device) for t in tr.next_batch())

        def fed():
            for _ in range(steps):
                tr.step(*tr.next_batch())

        def on_resident():
            for _ in range(steps):
                tr.step(*resident)

        fed_s, resident_s = _interleaved([fed, on_resident], device, opts["repeats"], opts["warmup"])
        tr.close()
        shares = [max(0.0, 1 - r / f) for f, r in zip(fed_s, resident_s)]
        out[f"{name}_stall"] = summarize(shares)
        out[f"{name}_fed_step_s"] = summarize([t / steps for t in fed_s])
        out[f"{name}_resident_step_s"] = summarize([t / steps for t in resident_s])
        out[f"{name}_config"] = cfg_fields(cfg)
        log(f"stall {name}: {summarize(shares)['median']:.1%} of step time lost to data")
    out["ratio"], out["ratio_note"] = stall_ratio(
        out["baseline_stall"]["median"], out["fast_stall"]["median"], opts["repeats"]
    )
    out["ratio_meaning"] = "baseline stall share / fast stall share"
    out["target"] = TARGETS["stall"]
    out["meets_target"] = out["fast_stall"]["median"] <= 0.05 if device.type == "cuda" else None
    return out


STALL_FLOOR = 0.005  # a stall share below half a percent is within the timing's noise of none


def stall_ratio(baseline: float, fast: float, repeats: int = MIN_SAMPLES) -> tuple[float | None, str]:
    """baseline / fast stall share, and a note; None, with the note saying why, when the shares come from
    fewer than MIN_SAMPLES repeats (one repeat gave a bare "ratio 0": a share clipped at none, with no spread
    to tell it from noise), or when either share is within timing noise of none: the fast path's too small to
    divide by (a share of 1e-12 made a ratio of 5e11 that meant nothing: revnet38 at batch size 1), the
    baseline's a ratio of about 0 that says nothing."""
    shares = f"the baseline's stall share is {baseline:.2%}, the fast path's {fast:.2%}"
    if repeats < MIN_SAMPLES:
        gives = "repeat gives" if repeats == 1 else "repeats give"
        return None, (
            f"no ratio: {repeats} {gives} no spread to tell the two shares apart "
            f"(at least {MIN_SAMPLES}: --repeats {MIN_SAMPLES}); {shares}"
        )
    if fast < STALL_FLOOR:
        return None, (
            f"no ratio: the fast path's stall share ({fast:.2%}) is within timing noise of none (below "
            f"{STALL_FLOOR:.1%}); the baseline's is {baseline:.2%}"
        )
    if baseline < STALL_FLOOR:
        return None, (
            f"no ratio: the baseline's stall share ({baseline:.2%}) is within timing noise of none (below "
            f"{STALL_FLOOR:.1%}); the fast path's is {fast:.2%}"
        )
    return baseline / fast, ""


# ------------------------------------------------------------------ plumbing
def _interleaved(
    fns: list[Callable[[], object]], device: torch.device, repeats: int, warmup: int
) -> list[list[float]]:
    """profiling.interleaved_timed with a log line per round."""
    return interleaved_timed(
        fns,
        device,
        repeats,
        warmup,
        on_round=lambda r, out: log(f"repeat {r + 1}/{repeats}: " + ", ".join(f"{t[-1]:.4f}s" for t in out)),
    )


def cfg_fields(cfg: RunConfig) -> dict[str, Any]:
    keys = (
        "model",
        "batch_size",
        "num_workers",
        "loader",
        "channels_last",
        "precision",
        "compile",
        "compile_mode",
        "persistent_workers",
        "device",
    )
    return {k: getattr(cfg, k) for k in keys}
