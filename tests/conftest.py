"""Shared fixtures: a small synthetic CIFAR-10 written once per session, tiny configs, and every task's
notebook rendered once per test run at the tiny profile (`rendered`), shared by every test that reads a
rendered report, across pytest-xdist's worker processes too.

Tests marked `cuda` run only where CUDA is (`pytest -m cuda` selects them: the GPU check kit's tests stage);
elsewhere they are skipped with that reason."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

# One intra-op thread in each test process and in every process a test starts (kernels, CLI runs, Slurm jobs,
# which inherit the environment): pytest-xdist runs one worker per core, and with torch's default of one
# OpenMP thread per core each worker's threads spin-waited against the other worker's. Measured on 2 cores, 2
# workers: the training, lab2 and memory tests took 149 s of CPU (87 s wall) with the default and 72 s (45 s)
# with one thread; the notebooks 278 s (152 s) and 206 s (117 s). Set before torch is imported (OpenMP reads
# it when torch loads); a value the caller set is kept. The tests check no speed (benchmarks do).
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Ctrl-C as a terminal's user sends it: a suite started in the background (nohup, `make test &`) inherits
# SIGINT ignored, and so does every process it starts, so the tests of what an interruption leaves behind
# would see none. Python's own handler again, here and (reset to the default on exec) in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest  # noqa: E402
import torch  # noqa: E402
from filelock import FileLock  # noqa: E402

from hpml_lab.config import RunConfig  # noqa: E402
from hpml_lab.data import cifar  # noqa: E402

TORCH_THREADS_AT_LOAD = torch.get_num_threads()  # before any test sets its own (the memory study does)


@pytest.fixture(autouse=True)
def _fresh_report_page():
    """report/page_record.py holds what one kernel's page shows (one page per kernel, notebook.config starts
    it): each test starts a page of its own, so no table or number of an earlier test's page reaches its
    answer record."""
    from hpml_lab.report import notebook

    notebook.new_page()


@pytest.fixture(autouse=True)
def _torch_backend_flags():
    """Each test starts from torch's backend flags as they were before it and leaves them so: a training run
    turns cuDNN autotuning on for the process (device.configure), and a GPU test that passed only after such a
    run (the graphed step's comparison with the eager one, on an H100) hid that it failed alone."""
    cudnn = torch.backends.cudnn
    saved = cudnn.benchmark, cudnn.deterministic
    yield
    cudnn.benchmark, cudnn.deterministic = saved


@pytest.fixture(scope="session")
def cifar_root(tmp_path_factory):
    """A synthetic CIFAR-10 in the real format with 1,000 + 200 images (seconds to write)."""
    root = tmp_path_factory.mktemp("data")
    cifar.synthesize(root, seed=0, n_train=1000, n_test=200)
    return root


@pytest.fixture
def tiny_cfg(cifar_root, tmp_path):
    """A config that trains the tiny ResNet for a few CPU batches and writes results under tmp_path."""
    return RunConfig(
        task="test",
        data_root=str(cifar_root),
        results_dir=str(tmp_path / "results"),
        model="resnet_tiny",
        batch_size=32,
        epochs=2,
        max_batches=3,
        num_workers=0,
        device="cpu",
        progress="none",
    )


@pytest.fixture(scope="session")
def tinyimagenet_root(tmp_path_factory):
    """A synthetic Tiny ImageNet, prepared: 200 classes x 2 train images, 1 val each (seconds to write)."""
    from hpml_lab.data import tinyimagenet

    root = tmp_path_factory.mktemp("tin")
    tinyimagenet.synthesize(root, classes=200, per_class=2, val_per_class=1, n_test=2, log=lambda m: None)
    return root


# Tasks whose notebook needs another dataset: (the dataset parameter, the fixture that writes its tiny copy).
TASK_DATA = {"tinyimagenet": ("tinyimagenet", "tinyimagenet_root")}
# What a task's run must leave the caller's environment as it found it (kernel.environment puts them back)
KERNEL_ENV = (
    "HPML_OUTPUT_DIR",
    "HPML_LAB_HOME",
    "HPML_PROGRESS",
    "HPML_RENDERING",
    "HPML_REPORT_STAGE",
    "PYTHONPATH",
)


def shared_dir(tmp_path_factory) -> Path:
    """A folder every process of this test run sees: the session's base temporary folder, or under
    pytest-xdist (each worker's base is <run's base>/popen-gwN) the run's base shared by the workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@dataclass(frozen=True)
class Rendered:
    """One task's notebook run by `hpml-lab run TASK --profile tiny` into `out` (HPML_OUTPUT_DIR: reports/,
    figures/, results/): read it, never write there (copy it first). `outcome` is runner.Outcome as a dict;
    `env_kept` whether the caller's environment (KERNEL_ENV) was the same after the run as before."""

    task: str
    out: Path
    outcome: dict
    env_kept: bool
    params: dict

    @property
    def reports(self) -> Path:
        return self.out / "reports"


@pytest.fixture(scope="session")
def rendered(tmp_path_factory, request):
    """rendered(task_id) -> Rendered: the task's notebook executed and rendered once per test run at the tiny
    profile, on the synthetic data, whichever test (or xdist worker) asks first; the others wait on a file
    lock and read the same folder (pytest-xdist's documented pattern for a session fixture run once)."""
    from dataclasses import asdict

    from hpml_lab.report import runner

    folder = shared_dir(tmp_path_factory) / "rendered"
    folder.mkdir(exist_ok=True)
    seen: dict[str, Rendered] = {}

    def render(task_id: str) -> Rendered:
        if task_id in seen:
            return seen[task_id]
        out, done = folder / task_id, folder / f"{task_id}.json"
        with FileLock(str(folder / f"{task_id}.lock")):
            if not done.is_file():
                dataset, fixture = TASK_DATA.get(task_id, ("cifar10", "cifar_root"))
                root = request.getfixturevalue(fixture)
                params = {"data_root": str(root), **({"dataset": dataset} if dataset != "cifar10" else {})}
                before = {k: os.environ.get(k) for k in KERNEL_ENV}
                os.environ["HPML_OUTPUT_DIR"] = str(out)
                try:
                    outcome = asdict(runner.run_task(task_id, "tiny", cli_params=params, log=lambda *a: None))
                finally:
                    kept = {k: os.environ.get(k) for k in KERNEL_ENV} == {
                        **before,
                        "HPML_OUTPUT_DIR": str(out),
                    }
                    if before["HPML_OUTPUT_DIR"] is None:
                        os.environ.pop("HPML_OUTPUT_DIR", None)
                    else:
                        os.environ["HPML_OUTPUT_DIR"] = before["HPML_OUTPUT_DIR"]
                record = {"outcome": outcome, "env_kept": kept, "params": params}
                done.write_text(json.dumps(record))
            record = json.loads(done.read_text())
        seen[task_id] = Rendered(task_id, out, record["outcome"], record["env_kept"], record["params"])
        return seen[task_id]

    return render


# Under pytest-xdist the longest tests start first, so that no worker is left with one of them at the end
# while the others are idle: the files whose single test takes minutes, then the other real-Slurm, browser and
# slow ones.
LONGEST = (
    "tests/notebooks/test_gpucheck_image.py",
    "tests/cluster/test_slurm_real.py",
    "tests/browser/test_browser.py",
)


# Out of `make test-fast` (marked slow here, so still in `make test`): the fast tier's slowest tests, each a
# real training loop, a subprocess or a signal, measured with --durations in one process at load 8 on 2 cores
# (seconds; about 6 times CI's figures). Together 1,005 of the tier's 1,604 s there; what is left took 365 s
# in one process at load 5-6 (with the last five below still in it: 76 s of it), and fits 60 s on 2 idle
# cores. tests/unit/test_suite.py checks that each still names a test.
FAST_TIER_OUT = {
    "tests/studies/test_lab2.py::test_c4_reads_best_from_c3_and_writes_trace": 71,
    "tests/studies/test_memory.py::test_activation_bytes_revnet_flat_with_depth_resnets_grow": 68,
    "tests/unit/test_training.py::test_loss_falls_on_synthetic_data": 64,
    "tests/faults/test_guard_runs.py::test_sigterm_marks_the_run_interrupted_and_keeps_finished_epochs": 91,
    "tests/studies/test_questions.py::test_questions_from_a_real_count": 53,
    "tests/unit/test_training.py::test_fp16_trains_on_cpu_with_a_grad_scaler_and_is_recorded": 51,
    "tests/unit/test_models.py::test_every_registered_model_builds_trains_one_step_and_counts[revnet218]": 48,
    "tests/studies/test_memory.py::test_measure_rows_have_times_and_overheads": 46,
    "tests/unit/test_gpu_loader.py::test_fast_path_options_off_by_default_and_train": 40,
    "tests/studies/test_questions.py::test_answers_for_resnet18": 38,
    "tests/unit/test_cli.py::test_file_system_errors_are_one_line": 36,
    "tests/faults/test_guard_runs.py::test_an_error_a_held_signal_lands_on_is_the_one_recorded": 32,
    "tests/unit/test_bench.py::test_bench_stall_compares_fed_steps_with_resident_ones": 32,
    "tests/studies/test_lab5.py::test_q1_counts_full_batch_steps_only": 31,
    "tests/faults/test_guard_runs.py::test_sigkill_mid_rerun_leaves_the_complete_run": 28,
    "tests/studies/test_memory.py::"
    "test_revnet_memory_saving_under_bf16_autocast_is_as_close_to_fp32_as_plain_autograd": 28,
    "tests/faults/test_guard_runs.py::"
    "test_switching_data_back_restores_the_kept_run_and_piles_up_no_copies": 23,
    "tests/unit/test_training.py::test_same_seed_same_losses": 23,
    "tests/studies/test_lab2.py::test_c3_loader_sweep_writes_rows_summary_and_resumes": 22,
    "tests/unit/test_bench.py::test_bench_precision_option_reaches_the_fast_path": 19,
    "tests/studies/test_memory.py::test_config_checkpoint_segments": 17,
    "tests/unit/test_training.py::test_timing_fields_present_and_consistent": 17,
    "tests/studies/test_lab2.py::test_c5_cpu_only_without_cuda": 16,
    "tests/unit/test_bench.py::test_bench_prints_one_json_line_and_saves_it": 16,
    "tests/studies/test_memory.py::test_revnet_memory_saving_gives_the_gradients_of_ordinary_autograd": 15,
    "tests/faults/test_guard_runs.py::test_failed_rerun_keeps_the_complete_run": 15,
    "tests/unit/test_gpucheck.py::"
    "test_a_command_killed_half_way_brings_home_its_finished_units_and_the_next_skips_them": 14,
    "tests/unit/test_timing.py::test_steps_are_not_synchronized_by_default": 13,
    "tests/unit/test_training.py::test_results_written_atomically_with_metadata": 13,
    "tests/unit/test_models.py::test_every_registered_model_builds_trains_one_step_and_counts[resnet50]": 13,
    "tests/unit/test_training.py::test_epochs_csv_carries_each_epochs_peak_memory": 11,
    # Then, on 2026-11-26, the fast tier took 65-77 s in pytest (69-89 s for `make test-fast`) on 2 idle
    # cores: the tests left in it that start a Python which imports torch (2-3 s of CPU each, most of what
    # they cost). Their CPU seconds, their subprocesses' included, measured then with -n 2 on the 2 cores:
    "tests/unit/test_packaging.py::test_the_recorded_torchvision_version_is_read_without_importing_it": 3.7,
    "tests/unit/test_gpucheck.py::test_limit_stops_the_command_itself_as_a_time_limit_would": 3.5,
    "tests/unit/test_gpucheck.py::"
    "test_a_job_stopped_by_sigterm_records_the_unit_it_cut_off_and_ends_in_one_line": 3.4,
    "tests/unit/test_cli.py::test_console_script_help": 3.4,
    "tests/unit/test_cli.py::test_binary_parameters_file_is_one_line": 3.2,
    "tests/cluster/test_distributed.py::"
    "test_leave_returns_code_alone_and_exits_a_rank_with_its_output_flushed": 2.9,
    # and the three longest of those that train or decode in the test's own process, for a margin under 60 s
    "tests/unit/test_gpu_loader.py::test_pil_pipeline_has_the_same_distribution": 2.1,
    "tests/faults/test_guard_data.py::"
    "test_other_data_at_the_same_path_is_a_new_run_and_the_old_one_is_kept": 1.9,
    "tests/studies/test_tinyimagenet.py::test_partial_copy_needs_allow_partial_and_says_so": 1.5,
}


def _fast_tier_out(item) -> bool:
    """Whether FAST_TIER_OUT names this test: by its id, or (every parametrization) by its id without one."""
    return item.nodeid in FAST_TIER_OUT or item.nodeid.split("[")[0] in FAST_TIER_OUT


# Tests that read every task's render (conftest's `rendered`) go last: started earlier, one waits on the other
# worker's renders (a file lock) with its own core idle.
AFTER_EVERY_RENDER = ("tests/notebooks/test_notebooks.py::test_bundle_holds_every_task_answer_first",)


def _start_order(item) -> int:
    if item.nodeid.startswith(LONGEST):
        return 0
    if item.nodeid.startswith(AFTER_EVERY_RENDER):
        return 3
    return 1 if {"slow", "slurm", "browser"} & set(item.keywords) else 2


# TRACED: `make test`'s branch coverage of the conclusion code (pyproject's [tool.coverage]) comes from these
# files' fast-tier tests: which test files reach that code was measured with pytest-cov's --cov-context=test
# (2026-11-26: these; tests/notebooks/test_notebooks.py is listed as it imports the claims check). Every other
# test runs with coverage paused (pytest-cov's no_cover marker), as do the slow, Slurm, browser and CUDA
# tests: coverage's tracer is called on every Python call; it made the real training runs in the test
# processes 50-65% slower in CPU time, and with every fast-tier file traced the tier took 31 s more CPU (86 s,
# 55 s untraced). tests/unit/test_suite.py checks that no other test file imports a covered module (or a
# helper that does).
TRACED_FILES = (
    "tests/studies/",
    "tests/faults/test_guard_runs.py",
    "tests/faults/test_guard_reports.py",
    "tests/notebooks/test_bundle.py",
    "tests/notebooks/test_notebooks.py",
    "tests/unit/test_answers.py",
    "tests/unit/test_data.py",
    "tests/unit/test_findings.py",
    "tests/unit/test_pages.py",
    "tests/unit/test_sanity.py",
    "tests/unit/test_verdict.py",
)


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the xdist_group marks added here
def pytest_collection_modifyitems(config, items):
    for item in items:
        if (
            "slurm" in item.keywords
        ):  # one local Slurm cluster (test_slurm_real's module fixture) on one worker
            item.add_marker(pytest.mark.xdist_group("slurm"))
        if _fast_tier_out(
            item
        ):  # before `-m "not slow ..."` is applied (pytest's own hook runs after this one)
            item.add_marker(pytest.mark.slow)
        if {"slow", "slurm", "browser", "cuda"} & set(item.keywords) or not item.nodeid.startswith(
            TRACED_FILES
        ):
            item.add_marker(pytest.mark.no_cover)  # see TRACED_FILES
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker sorts alike (the order xdist hands tests out in)
        items.sort(key=_start_order)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (marked cuda)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


_REAL = ("slurm", "browser", "cuda")  # tests that need a real outside part; the log says whether they ran


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per marker of _REAL: how many of its tests passed, failed or were skipped (and why), so a CI
    log shows whether the Slurm, browser and CUDA tests ran for real here."""
    counts: dict[str, dict[str, int]] = {m: {} for m in _REAL}
    reasons: dict[str, set] = {m: set() for m in _REAL}
    for outcome in ("passed", "failed", "skipped", "error"):
        for rep in terminalreporter.stats.get(outcome, []):
            keywords = getattr(rep, "keywords", {}) or {}
            for m in _REAL:
                if m in keywords and (rep.when == "call" or outcome in ("skipped", "error")):
                    counts[m][outcome] = counts[m].get(outcome, 0) + 1
                    if outcome == "skipped" and isinstance(rep.longrepr, tuple):
                        reasons[m].add(str(rep.longrepr[2]).removeprefix("Skipped: "))
    for m in _REAL:
        if counts[m]:
            line = ", ".join(f"{n} {k}" for k, n in sorted(counts[m].items()))
            why = f" ({'; '.join(sorted(reasons[m]))})" if reasons[m] else ""
            terminalreporter.write_line(f"{m} tests: {line}{why}")
