"""Where a profiler trace's time went (hpml_lab.tracing.breakdown): the labelled ranges of a CPU trace, and
Holistic Trace Analysis (traceinsight) on a trace with GPU kernels."""

import gzip
import json

import pytest
import torch

from hpml_lab import tracing
from hpml_lab.data import build_loader
from hpml_lab.step import build_model, build_optimizer


def _trace(cfg, device, path):
    model = build_model(cfg, device)
    return tracing.trace_steps(
        model,
        build_loader(cfg, device),
        device,
        build_optimizer(cfg, model.parameters()),
        path,
        steps=2,
        warmup=1,
        cfg=cfg,
    )


def test_a_cpu_trace_is_broken_down_by_its_labelled_ranges_and_says_why(tiny_cfg, tmp_path):
    tr = _trace(tiny_cfg, torch.device("cpu"), tmp_path / "trace.json")
    assert not tracing.has_gpu_kernels(tr.path)
    bd = tracing.breakdown(tr.path)
    assert bd.table["category"].tolist() == list(tracing.LABELS) and bd.idle is None
    assert bd.table.set_index("category").loc[["forward", "backward"], "time_ms"].min() > 0
    assert bd.table["share"].sum() == pytest.approx(1.0)
    assert (
        "labelled ranges" in bd.source
        and "no GPU kernels" in bd.note
        and "Holistic Trace Analysis" in bd.note
    )
    # the report's gzipped copy reads the same
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(tr.path.read_bytes()))
    assert tracing.labelled_ranges(gz)["time_ms"].tolist() == bd.table["time_ms"].tolist()


def _kineto_trace(path, gaps_us=(30, 30, 400, 30, 30)):
    """A trace in Kineto's Chrome-trace format with GPU kernels: host ops launching kernels on stream 7 (a
    conv kernel, then a host-to-device copy, alternately), with the gaps between kernels given."""
    ev, t = [], 1000.0
    for i, gap in enumerate((0, *gaps_us)):
        t += gap
        corr = {"correlation": 100 + i, "External id": i + 1}
        ev += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::conv2d",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 20,
                "args": {"External id": i + 1},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t + 5,
                "dur": 5,
                "args": corr,
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "sm90_xmma_fprop_conv" if i % 2 == 0 else "Memcpy HtoD",
                "pid": 0,
                "tid": 7,
                "ts": t + 12,
                "dur": 30,
                "args": {**corr, "stream": 7, "device": 0},
            },
        ]
        t += 42
    path.write_text(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": 0}}))
    return path


def test_a_trace_with_gpu_kernels_goes_through_holistic_trace_analysis(tmp_path):
    bd = tracing.breakdown(_kineto_trace(tmp_path / "gpu.json"))
    assert bd.source.startswith("Holistic Trace Analysis (traceinsight ")
    t = bd.table.set_index("category")["time_ms"]
    # 6 kernels of 30 us: 3 compute, 3 copies; the span from the first kernel's start to the last one's end
    # minus the kernels is idle (gaps of 30, 30, 400, 30, 30 us between kernel starts 42 + gap apart, less 30)
    assert t["kernel compute"] == pytest.approx(0.09) and t[
        "other kernels (memory, communication)"
    ] == pytest.approx(0.09)
    assert t["GPU idle"] == pytest.approx((5 * 42 + 520 - 5 * 30) / 1e3)
    assert bd.idle is not None and bd.idle["time_ms"].sum() == pytest.approx(t["GPU idle"])
    assert "host wait" in bd.note


@pytest.mark.cuda
def test_a_real_cuda_trace_is_broken_down_by_holistic_trace_analysis(tiny_cfg, tmp_path):
    tr = _trace(tiny_cfg.replace(device="cuda"), torch.device("cuda"), tmp_path / "trace.json")
    assert tracing.has_gpu_kernels(tr.path)
    bd = tracing.breakdown(tr.path)
    assert bd.source.startswith("Holistic Trace Analysis")
    assert bd.table.set_index("category").loc["kernel compute", "time_ms"] > 0
    assert bd.table["share"].sum() == pytest.approx(1.0)


def test_a_breakdown_that_fails_keeps_the_answer_and_is_shown_where_its_tables_go(tmp_path, monkeypatch):
    """C8's answer states from the breakdown, computed before it: an analysis that raises (here, a damaged
    trace) is handed on as the error, the answer goes on without it, and the page shows the error in one line.
    C4's page, which computes none before, shows it the same way (the analysis raised out of its cell)."""
    from hpml_lab.report import displays
    from hpml_lab.report import notebook as nb

    bad = tmp_path / "trace.json"
    bad.write_text('{"traceEvents": [')
    err = nb.breakdown_or_error(bad)
    assert isinstance(err, ValueError)
    shown = []
    monkeypatch.setattr(displays, "warn", shown.append)  # where trace_breakdown looks it up
    assert nb.trace_breakdown(bad, err) is None
    assert len(shown) == 1 and shown[0].startswith("The trace could not be broken down (JSONDecodeError: ")
    assert nb.trace_breakdown(bad) is None  # C4: computed here
    assert len(shown) == 2 and shown[1] == shown[0]
