"""The suite's own set-up in tests/conftest.py: the fast tier's list of tests kept out of it."""

import ast
from pathlib import Path

import conftest
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_test_kept_out_of_the_fast_tier_still_exists():
    """A renamed or moved test would silently come back into `make test-fast`: each entry names a test
    function in its file (a parametrized entry, its function)."""
    for nodeid in conftest.FAST_TIER_OUT:
        path, name = nodeid.split("::")
        assert (ROOT / path).is_file(), nodeid
        assert name.split("[")[0] in _tests_in(ROOT / path), nodeid


def _imported_names(path: Path) -> set[str]:
    """Every dotted part of every module a file imports, and every name it imports from one (ast: multi-line
    imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {part for alias in node.names for part in alias.name.split(".")}
        elif isinstance(node, ast.ImportFrom):
            names |= set((node.module or "").split(".")) | {alias.name for alias in node.names}
    return names - {""}


def test_the_traced_files_exist_and_no_other_test_file_imports_a_module_the_coverage_measures():
    """Coverage is measured on the conclusion code (pyproject's [tool.coverage.run] include) in the tests of
    TRACED_FILES only; a file run untraced must not be where that code is exercised. Read from each other test
    file's own imports, a helper of tests/ that imports covered code (study_checks) counting as covered; what
    the imported modules reach in turn is not followed: the total coverage, printed by make test, checks
    that."""
    import tomllib

    covered = {
        Path(g).name.removesuffix(".py").replace("*", "")
        for g in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["run"]["include"]
    }
    assert "findings" in covered and "verdict" in covered and "conclusion" in covered

    def reaches(names: set[str]) -> set[str]:
        return {n for n in names if any(c and c in n for c in covered)}

    helpers = {
        p.stem for p in (ROOT / "tests").glob("*.py") if p.stem != "conftest" and reaches(_imported_names(p))
    }
    assert "study_checks" in helpers  # it imports hpml_lab.answers and the claims check
    assert all((ROOT / rel).exists() for rel in conftest.TRACED_FILES), conftest.TRACED_FILES
    untraced = [
        p
        for p in sorted((ROOT / "tests").rglob("test_*.py"))
        if not str(p.relative_to(ROOT)).startswith(conftest.TRACED_FILES)
    ]
    assert len(untraced) > 20 and ROOT / "tests/unit/test_training.py" in untraced
    for path in untraced:
        names = _imported_names(path)
        assert not reaches(names) and not names & helpers, (path, reaches(names) | (names & helpers))


class _Item:
    def __init__(self, nodeid):
        self.nodeid = nodeid


@pytest.mark.parametrize(
    "nodeid, out",
    [
        ("tests/unit/test_training.py::test_loss_falls_on_synthetic_data", True),
        (
            "tests/faults/test_guard_runs.py::test_sigterm_marks_the_run_interrupted_and_keeps_finished_epochs[x]",
            True,
        ),
        (
            "tests/unit/test_models.py::test_every_registered_model_builds_trains_one_step_and_counts[revnet218]",
            True,
        ),
        (
            "tests/unit/test_models.py::test_every_registered_model_builds_trains_one_step_and_counts[resnet18]",
            False,
        ),
        ("tests/unit/test_training.py::test_loss_falls", False),
    ],
)
def test_kept_out_by_id_or_by_function(nodeid, out):
    assert conftest._fast_tier_out(_Item(nodeid)) is out


def test_under_xdist_the_longest_start_first_and_the_bundle_of_every_render_goes_last():
    order = [
        conftest._start_order(_Marked(nodeid, marks))
        for nodeid, marks in [
            (
                "tests/cluster/test_slurm_real.py::test_a_job_across_two_nodes_in_a_container",
                {"slurm", "slow"},
            ),
            ("tests/notebooks/test_notebooks.py::test_notebook_executes_and_renders[c1]", {"slow"}),
            ("tests/unit/test_io.py::test_x", set()),
            ("tests/notebooks/test_notebooks.py::test_bundle_holds_every_task_answer_first", {"slow"}),
        ]
    ]
    assert order == sorted(order) and len(set(order)) == 4
    for nodeid in (*conftest.LONGEST, *conftest.AFTER_EVERY_RENDER):
        path, _, name = nodeid.partition("::")
        assert (ROOT / path).is_file() and (not name or name in _tests_in(ROOT / path)), nodeid


class _Marked(_Item):
    def __init__(self, nodeid, marks):
        super().__init__(nodeid)
        self.keywords = dict.fromkeys(marks, True)


class _Collected:
    """What pytest_collection_modifyitems reads and writes of a test item."""

    def __init__(self, nodeid, *marks):
        self.nodeid, self.keywords, self.added = nodeid, dict.fromkeys(marks, True), []

    def add_marker(self, mark):
        self.added.append(mark.name)
        self.keywords[mark.name] = True


def test_the_slow_tier_runs_untraced_and_the_fast_tier_traced(monkeypatch):
    """TRACED_FILES in tests/conftest.py: coverage is paused (pytest-cov's no_cover) in slow, Slurm, browser
    and CUDA tests, in those FAST_TIER_OUT marks slow and in fast tests outside TRACED_FILES; the fast tests
    of those files are traced."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    items = [
        _Collected("tests/studies/test_conclusions.py::test_x"),
        _Collected("tests/unit/test_verdict.py::test_v"),
        _Collected("tests/notebooks/test_notebooks.py::test_y", "slow"),
        _Collected("tests/cluster/test_slurm_real.py::test_z", "slurm"),
        _Collected(
            "tests/studies/test_lab2.py::test_c4_reads_best_from_c3_and_writes_trace"
        ),  # FAST_TIER_OUT
        _Collected("tests/unit/test_config.py::test_c"),  # fast, reaches no conclusion code
    ]
    conftest.pytest_collection_modifyitems(None, items)
    assert ["no_cover" in i.added for i in items] == [False, False, True, True, True, True]


def test_a_test_process_loads_torch_with_the_one_thread_conftest_sets():
    """conftest sets OMP_NUM_THREADS (one thread, where the caller set none) before torch loads, in the
    environment every process a test starts inherits: torch in this worker loaded with it (read at load,
    before any test set its own thread count). With the variable set after torch loads, torch takes one thread
    per core."""
    import os

    threads = int(os.environ["OMP_NUM_THREADS"])
    assert 1 <= conftest.TORCH_THREADS_AT_LOAD <= threads  # fewer where the caller asked more than the cores


def _marked_helpers(source: str) -> list[str]:
    """Functions that carry a pytest mark but are no test (a name without 'test_'): a mark on one does
    nothing, so the test it was meant for runs in a tier it was kept out of."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("test_"):
            marks = [ast.unparse(d) for d in node.decorator_list if ".mark." in ast.unparse(d)]
            out += [f"{node.name}: {m}" for m in marks]
    return out


def test_no_mark_sits_on_a_function_that_is_no_test():
    """review31: '@pytest.mark.slow' slid onto a helper put above its test, which then ran in the fast
    tier (about 40 s more there)."""
    found = [
        f"{p.relative_to(ROOT)}: {m}"
        for p in (ROOT / "tests").rglob("test_*.py")
        for m in _marked_helpers(p.read_text())
    ]
    assert found == []
    slid = "import pytest\n@pytest.mark.slow\ndef _helper():\n    pass\ndef test_it():\n    pass\n"
    assert _marked_helpers(slid) == ["_helper: pytest.mark.slow"]
