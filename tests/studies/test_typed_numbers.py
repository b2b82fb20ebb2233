"""No number is typed into prose a reader sees (issue 27): a grep, by the syntax tree, over every notebook's
code cells and every conclusion module. A notebook shows what the record holds (tables through the one
formatter, findings through the answer box or nb.said); a conclusion binds its numbers as Number slots
(findings.say).

Flagged: a format spec ('{x:.3g}', '{n:,}'), %-formatting or str.format anywhere in those sources (each would
print a number by its own rule, not fmt's); and in a notebook, an f-string value put into text shown by print,
Markdown, HTML or a notice, unless the value is a word (a model, backend or device name, a link, a path)."""

import ast
import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOWS = {"print", "Markdown", "HTML", "warn", "notice", "caveat"}
# core helpers that type a number into a sentence (tracing.recorded: 'recorded 5 step(s) after 2 warm-up ...')
TYPING_HELPERS = {"recorded"}
# values that are words, not numbers: names of things, links and paths
WORDS = re.compile(
    r"(model|backend|dataset|device|name|kind|label|artifact|run_dir|source|path|mode|LOADER_NOTE|WARMUP_NOTE)"
)


def conclusion_modules() -> list[Path]:
    """The modules that decide a report's sentences, as pyproject's coverage include names them under
    hpml_lab/studies: every task folder's conclusion.py and the conclusion modules the tasks share."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["run"]["include"]
    globs = [g.split("/hpml_lab/", 1)[1] for g in include if "/hpml_lab/studies/" in g]
    return sorted({p for g in globs for p in (ROOT / "hpml_lab").glob(g)})


def code_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def _name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def typed_numbers(source: str, notebook: bool) -> list[str]:
    """The places in `source` where a number is typed into text rather than bound or tabled."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            found.append(f"format spec: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Mod)
            and isinstance(node.left, ast.Constant)
        ):
            if isinstance(node.left.value, str):
                found.append(f"%-format: {ast.unparse(node)[:80]}")
        elif (
            isinstance(node, ast.Call)
            and _name(node.func) == "format"
            and isinstance(node.func, ast.Attribute)
        ):
            if isinstance(node.func.value, ast.Constant):
                found.append(f"str.format: {ast.unparse(node)[:80]}")
        elif notebook and isinstance(node, ast.Call) and _name(node.func) in SHOWS:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                for sub in ast.walk(arg):
                    if isinstance(sub, ast.Call) and _name(sub.func) in TYPING_HELPERS:
                        found.append(f"{_name(node.func)} shows {_name(sub.func)}(), which types its numbers")
                    if isinstance(sub, ast.FormattedValue) and not WORDS.search(ast.unparse(sub.value)):
                        found.append(f"{_name(node.func)} shows {{{ast.unparse(sub.value)}}}")
    return found


def sources() -> dict[str, tuple[str, bool]]:
    out = {str(p.relative_to(ROOT)): (p.read_text(), False) for p in conclusion_modules()}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(code_cells(nb)):
            out[f"{nb.name} code cell {i}"] = (cell, True)
    return out


def test_the_grep_reads_every_notebook_and_conclusion_module():
    got = sources()
    # every task folder's conclusion.py, the shared conclusion modules beside them
    tasks = {
        p.parent.name
        for p in (ROOT / "hpml_lab" / "studies").glob("*/__init__.py")
        if "TASK =" in p.read_text()
    }
    assert {f"hpml_lab/studies/{t}/conclusion.py" for t in tasks} <= set(got) and len(tasks) >= 14
    assert {"hpml_lab/studies/_conclude.py", "hpml_lab/studies/lab2_conclusion.py"} <= set(got)
    assert {k.split(" ")[0] for k in got if "ipynb" in k} == {
        p.name for p in (ROOT / "notebooks").glob("*.ipynb")
    }


def test_no_number_is_typed_into_prose():
    found = {where: hits for where, (text, nb) in sources().items() if (hits := typed_numbers(text, nb))}
    assert found == {}


@pytest.mark.parametrize(
    "planted",
    [
        'print(f"{len(batches)} batches over {len(epochs)} epochs")',
        'display(Markdown(f"The mean of {smooth} consecutive batches."))',
        'display(Markdown("tolerance %.0f%%" % tol))',
        'nb.notice("{} epochs".format(n))',
        'x = f"{share:.1%} of the epoch"',
        'label = f"{n:,} images"',
        'display(Markdown(tracing.recorded(tr) + " Trace: link"))',
    ],
)
def test_a_planted_typed_number_is_found(planted):
    assert typed_numbers(planted, notebook=True) != []


def test_words_and_bound_numbers_pass():
    assert typed_numbers('nb.warn(f"Backend <b>{cfg.compile_backend}</b>: not the default")', True) == []
    assert typed_numbers('say("loss {loss}", loss=num("loss", xs, ""))', False) == []
    assert typed_numbers('Number(f"global batch {gb}: loss", 1.0, "", "measured", n=1)', False) == []


# the calls that make a Number, and where each takes its name (and `source=`): a value put into a name or
# a source goes in through the one formatter (findings.fmt_in), as in a sentence, unless it is a word
NUMBER_MAKERS = {"Number": 0, "num": 0, "setting": 0, "counted": 0, "worker_label": 1, "workers_list": 1}
# words a name may take from an f-string: names of things (WORDS, a variant, a rung, what is measured, a
# precision), and _conclude.workers(), which writes its counts through the formatter
NAME_WORDS = re.compile(rf"{WORDS.pattern}|variant|rung|what|precision|\bworkers\(")


def shaped_names(source: str) -> list[str]:
    """The Numbers' names and sources (and worker labels' names) in `source` into which an f-string or str()
    puts a value that is not a word: a count typed there by Python's own str ('global batch 8192') reads
    otherwise than the same count in a sentence or a table ('8,192')."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and _name(node.func) in NUMBER_MAKERS):
            continue
        at = NUMBER_MAKERS[_name(node.func)]
        args = [*node.args[at : at + 1], *(k.value for k in node.keywords if k.arg in ("name", "source"))]
        if _name(node.func) == "Number" and len(node.args) > 6:
            args.append(node.args[6])  # Number's source, given by position
        for arg in args:
            for sub in ast.walk(arg):
                if isinstance(sub, ast.FormattedValue) and not NAME_WORDS.search(ast.unparse(sub.value)):
                    found.append(f"{_name(node.func)} at line {node.lineno}: {{{ast.unparse(sub.value)}}}")
                elif isinstance(sub, ast.Call) and _name(sub.func) == "str":
                    found.append(f"{_name(node.func)} at line {node.lineno}: {ast.unparse(sub)}")
    return found


def test_no_number_name_or_source_is_shaped_by_hand():
    found = {
        where: hits for where, (text, nb) in sources().items() if not nb and (hits := shaped_names(text))
    }
    assert found == {}


@pytest.mark.parametrize(
    "planted",
    [
        'Number(f"global batch {gb}: loss", 1.0, "", "measured", n=1)',
        'Number("chance", 2.3, "", "predicted", source=f"ln {classes}: a uniform guess")',
        'Number("chance", 2.3, "", "predicted", 1, None, f"ln {classes}")',
        'num(f"{n} workers: data wait", xs, "ms")',
        "setting(str(n), n)",
        'worker_label(n, f"C3 worker count {n}")',
    ],
)
def test_a_name_shaped_by_hand_is_found(planted):
    assert shaped_names(planted) != []


def test_names_through_the_formatter_or_of_words_pass():
    assert shaped_names('Number(fmt_in("global batch {gb}: loss", gb=gb), 1.0, "", "measured", n=1)') == []
    assert shaped_names('num(f"{model}: step", xs, "ms")') == [] and shaped_names('num("loss", xs, "")') == []
    assert shaped_names('num(f"{workers(n)}: data wait", xs, "ms")') == []


def unshown_tables(source: str) -> list[str]:
    """nb.table(...) calls whose table a reader never sees: it returns a Styler, shown only as a cell's last
    top-level expression or through display()."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    return [
        ast.unparse(node)[:80]
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and _name(node.value.func) == "table"
        and node is not last
    ]


def test_every_table_a_notebook_builds_is_shown():
    found = {w: hits for w, (text, nb) in sources().items() if nb and (hits := unshown_tables(text))}
    assert found == {}
    assert unshown_tables("nb.table(a)\nx = 1") and not unshown_tables("x = 1\nnb.table(a)")
    assert unshown_tables("if x:\n    nb.table(a)\nelse:\n    y = 2") and not unshown_tables(
        "display(nb.table(a))\nx = 1"
    )
