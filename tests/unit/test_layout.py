"""The package's layers: core (hpml_lab/*.py, models/, data/) <- studies/ <- report/ <- gpu/ (the GPU check
kit).

Each module imports only from its own layer or the layers below, no two modules import each other
(directly or through others), and every module says in its docstring what it holds.
"""

import ast
import re
import sys
from pathlib import Path

import pytest

import hpml_lab

PKG = Path(hpml_lab.__file__).parent
LAYER = {"studies": 1, "report": 2, "gpu": 3}


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYER.get(parts[1], 0) if len(parts) > 1 else 0


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """hpml_lab modules that `name` imports anywhere in its body (function-level imports count)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            candidates = [mod] + [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        for c in candidates:
            while c and c not in known:
                c = c.rpartition(".")[0]
            if c and c != name and c != "hpml_lab":
                found.add(c)
    return found


def test_no_module_imports_from_a_higher_layer():
    mods = _modules()
    bad = [
        f"{m} (layer {_layer(m)}) imports {d} (layer {_layer(d)})"
        for m, p in mods.items()
        for d in _imports(m, p, set(mods))
        if _layer(d) > _layer(m)
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    mods = _modules()
    graph = {m: {d for d in _imports(m, p, set(mods)) if not m.startswith(d + ".")} for m, p in mods.items()}
    # a module importing its own package (__init__) is not a cycle worth reporting; anything else is
    cycles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    cycles.append(" -> ".join(path + [nxt]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    assert not cycles, "\n".join(sorted(set(cycles))[:10])


def test_every_module_has_a_docstring():
    missing = [
        m
        for m, p in _modules().items()
        if p.read_text().strip() and not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not missing, missing


def test_layout_detects_an_upward_import(tmp_path):
    # the checker itself: a core module importing report/ would be caught
    f = tmp_path / "x.py"
    f.write_text("from .report import runner\n")
    assert "hpml_lab.report.runner" in _imports(
        "hpml_lab.x", f, {"hpml_lab.report", "hpml_lab.report.runner"}
    )


def test_readme_layout_table_names_every_module_in_its_layer():
    # the table moved from README.md to docs/layout.md (issue 31), linked from the README
    assert "(docs/layout.md)" in (PKG.parent / "README.md").read_text()
    layout = (PKG.parent / "docs" / "layout.md").read_text()
    core, rest = layout.split("| **studies**", 1)
    studies, rest = rest.split("| **report**", 1)
    report, gpu = rest.split("| **gpu**", 1)
    section = {0: core, 1: studies, 2: report, 3: gpu}
    missing = []
    for f in PKG.rglob("*.py"):
        rel = f.relative_to(PKG)
        text = section[LAYER.get(rel.parts[0], 0) if len(rel.parts) > 1 else 0]
        if rel.parts[0] == "studies" and len(rel.parts) > 2:
            continue  # a task's own folder: its TASK says what it is, and adding a task touches no table
        if f.name != "__init__.py" and f"`{f.name}`" not in text and f"/{f.name}`" not in text:
            missing.append(str(rel))
    assert not missing, f"docs/layout.md's table does not name {sorted(missing)} in their layer's rows"


def test_ruff_format_and_check_pass():
    # a formatter decides layout (110 columns), not a file-length cap; ruff check holds the lint rules of
    # pyproject
    import shutil
    import subprocess

    # the venv's own ruff first: `make test` runs the venv's python without putting its bin/ on PATH
    beside = Path(sys.executable).parent / "ruff"
    ruff = (str(beside) if beside.is_file() else shutil.which("ruff")) or pytest.skip(
        "ruff is not installed (make setup installs it with the test extra)"
    )
    root = PKG.parent
    fmt = subprocess.run([ruff, "format", "--check", "."], cwd=root, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    lint = subprocess.run([ruff, "check", "."], cwd=root, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


_EXAMPLE_IMPORT = re.compile(r"(from hpml_lab(\.\w+)* import [\w, ]+|import hpml_lab(\.\w+)*)(\s*#.*)?")


def _docstring_imports() -> list[tuple[str, str]]:
    """Every `from hpml_lab... import ...` line in a docstring example of the package (module, class,
    function)."""
    found = []
    for f in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                for line in (ast.get_docstring(node) or "").splitlines():
                    if _EXAMPLE_IMPORT.fullmatch(line.strip()):
                        found.append((str(f.relative_to(PKG)), line.strip()))
    return found


def test_docstring_examples_import_what_they_name():
    # the docstrings' examples start with the import a reader copies; a module that moved makes it an
    # ImportError
    examples = _docstring_imports()
    assert (
        len(examples) >= 10
    )  # the check reads the examples (a pattern that matched nothing would pass anything)
    broken = []
    for where, line in examples:
        try:
            exec(line, {})
        except ImportError as e:
            broken.append(f"{where}: {line} ({e})")
    assert not broken, "\n".join(broken)


def test_a_stale_docstring_import_is_caught(tmp_path):
    assert _EXAMPLE_IMPORT.fullmatch("from hpml_lab import RunConfig, lab2")
    with pytest.raises(ImportError):
        exec("from hpml_lab import RunConfig, lab2", {})  # lab2 lives in hpml_lab.studies


@pytest.mark.parametrize("package", ["studies", "report", "gpu"])
def test_package_docstring_table_names_every_module(package):
    doc = ast.get_docstring(ast.parse((PKG / package / "__init__.py").read_text()))
    named = {line.split("|")[1].strip() for line in doc.splitlines() if line.startswith("| ")}
    files = {f.stem for f in (PKG / package).glob("*.py") if f.name != "__init__.py"}
    assert files <= named, f"hpml_lab/{package}/__init__.py's table omits {sorted(files - named)}"
