"""Every command in README.md and docs/*.md stays runnable: shell blocks (fenced or indented) and inline
commands parse (`bash -n`), every `make` target exists in the Makefile, every `hpml-lab` subcommand and flag
is accepted by the real argparse parsers (`hpml-lab`'s and `python -m hpml_lab`'s, also under torchrun), every
`python -m` module imports, Python blocks compile and their `hpml_lab` imports resolve, and every linked file
exists."""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# an inline code span is a command when it starts with one of these (after VAR=value assignments)
COMMAND_WORDS = (
    "make",
    "hpml-lab",
    "python",
    "python3",
    "torchrun",
    "sbatch",
    "apptainer",
    "singularity",
    "pip",
)
_FENCE = re.compile(r"^\s*```(\w*)\s*$")
_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;"}


@dataclass
class Found:
    shell: list[tuple[str, str]] = field(default_factory=list)  # (where, text)
    python: list[tuple[str, str]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)


def extract(text: str, name: str) -> Found:
    """Shell and Python blocks, inline commands and links of one markdown text."""
    found, lines = Found(), text.split("\n")
    i = 0
    prose: list[str] = []
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not _FENCE.match(lines[j]):
                j += 1
            body = "\n".join(lines[i + 1 : j])
            lang = m.group(1).lower()
            if lang == "python":
                found.python.append((f"{name}:{i + 1}", body))
            elif lang in ("bash", "sh", "shell", ""):
                found.shell.append((f"{name}:{i + 1}", body))
            i = j + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):  # an indented code block
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            found.shell.append((f"{name}:{i + 1}", "\n".join(x[4:] for x in lines[i:j])))
            i = j
            continue
        prose.append((i + 1, lines[i]))
        i += 1
    for n, line in prose:
        for span in _SPAN.findall(line):
            words = span.split()
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                words = words[1:]
            if words and (words[0] in COMMAND_WORDS or words[0].endswith("/hpml-lab")):
                found.shell.append((f"{name}:{n}", span))
        found.links += [(f"{name}:{n}", target) for target in _LINK.findall(line)]
    return found


def simple_commands(text: str) -> list[list[str]]:
    """The simple commands of a shell text as word lists (comments, `VAR=value` prefixes and `...`
    dropped)."""
    commands = []
    for line in text.replace("\\\n", " ").split("\n"):
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        lex.commenters = "#"
        current: list[str] = []
        for token in list(lex) + [";"]:
            if token in _SEPARATORS:
                while current and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", current[0]):
                    current = current[1:]
                if current:
                    commands.append([w for w in current if w not in ("...", "…")])
                current = []
            else:
                current.append(token)
    return commands


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M)}


def _parses(parser, argv: list[str], known: bool = False) -> str | None:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            if known:
                _, unknown = parser.parse_known_args(argv)
                if unknown:
                    return f"unknown flags {unknown}"
            else:
                parser.parse_args(argv)
    except SystemExit as e:
        if e.code == 0:  # --help
            return None
        return err.getvalue().strip() or f"exit {e.code}"
    return None


def _module_problem(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any failure to import is the finding
        return f"python -m {module}: does not import ({type(e).__name__}: {e})"
    return None


def check_python_m(module: str, args: list[str]) -> list[str]:
    from hpml_lab.__main__ import build_parser as train_parser
    from hpml_lab.report.cli import build_parser

    problem = _module_problem(module)
    if problem:
        return [problem]
    if module == "hpml_lab":
        bad = _parses(train_parser(), args, known=True)
    elif module == "hpml_lab.report.cli":
        bad = _parses(build_parser(), args)
    elif module == "torch.distributed.run":
        return check_torchrun(args)
    else:
        bad = None
    return [f"python -m {module} {' '.join(args)}: {bad}"] if bad else []


def check_torchrun(args: list[str]) -> list[str]:
    if "-m" not in args:
        return [f"torchrun {' '.join(args)}: no -m MODULE"]
    k = args.index("-m")
    return check_python_m(args[k + 1], args[k + 2 :])


def check_command(words: list[str], targets: set[str]) -> list[str]:
    """What is wrong with one simple command (nothing for commands this test does not know)."""
    from hpml_lab.report.cli import build_parser

    cmd, args = words[0], words[1:]
    if cmd == "make":
        missing = [a for a in args if "=" not in a and not a.startswith("-") and a not in targets]
        return [f"make {' '.join(args)}: no target {m!r} in the Makefile" for m in missing]
    if cmd == "hpml-lab" or cmd.endswith("/hpml-lab"):
        if args[:1] == ["train"]:
            return check_python_m("hpml_lab", args[1:])
        bad = _parses(build_parser(), args)
        if bad and "arguments are required" in bad and not any(a.startswith("-") for a in args):
            bad = None  # a span that names a command (`hpml-lab run`): its words exist, nothing more is said
        return [f"hpml-lab {' '.join(args)}: {bad}"] if bad else []
    if cmd in ("python", "python3") or cmd.endswith("/python"):
        if "-m" in args:
            k = args.index("-m")
            if k + 1 == len(args):
                return []  # a span that names the form (`python3 -m`), no module to check
            return check_python_m(args[k + 1], args[k + 2 :])
        return []
    if cmd == "torchrun":
        return check_torchrun(args)
    return []


def check_shell(where: str, text: str, targets: set[str]) -> tuple[list[str], int]:
    r = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
    if r.returncode:
        return [f"{where}: bash -n: {r.stderr.strip()}"], 0
    problems, commands = [], simple_commands(text)
    for words in commands:
        problems += [f"{where}: {p}" for p in check_command(words, targets)]
    return problems, len(commands)


def check_python_block(where: str, text: str) -> list[str]:
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return [f"{where}: Python block does not compile: {e}"]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hpml_lab"):
            mod = importlib.import_module(node.module)
            problems += [
                f"{where}: {node.module} has no {a.name}" for a in node.names if not hasattr(mod, a.name)
            ]
    return problems


def _anchors(text: str) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6} (.+)$", re.sub(r"```.*?```", "", text, flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def check_docs(docs: list[Path]) -> tuple[list[str], dict[str, int]]:
    targets, problems = _makefile_targets(), []
    counts = {"shell": 0, "commands": 0, "links": 0, "python": 0}
    for path in docs:
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
        found = extract(path.read_text(), name)
        for where, text in found.shell:
            bad, n = check_shell(where, text, targets)
            problems += bad
            counts["shell"] += 1
            counts["commands"] += n
        for where, text in found.python:
            problems += check_python_block(where, text)
            counts["python"] += 1
        for where, target in found.links:
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            counts["links"] += 1
            file, _, anchor = target.partition("#")
            linked = path.parent / file if file else path
            if not linked.exists():
                problems.append(f"{where}: links to {target}, which does not exist")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text()):
                problems.append(f"{where}: links to {target}, but {linked.name} has no such heading")
    return problems, counts


def test_every_command_and_link_in_the_readme_and_docs_works():
    problems, counts = check_docs(DOCS)
    assert not problems, "\n".join(problems)
    # the extraction found what is there (an empty harvest would pass anything)
    assert counts["commands"] >= 60 and counts["links"] >= 11 and counts["python"] >= 1, counts


def test_the_checker_finds_each_kind_of_broken_command(tmp_path):
    doc = tmp_path / "bad.md"
    doc.write_text(
        "Run `make reprot` then `hpml-lab run c1 --proflie full`.\n\n"
        "```bash\nhpml-lab slurm c2 --containr lab.sif\npython -m hpml_lab.nope\n"
        "torchrun --standalone -m hpml_lab --epochz 2\nhpml-lab bogus\n```\n\n"
        "    make test && hpml-lab run c1 -p x=1 'unclosed\n\n"
        "See [the page](missing.md), [here](#nowhere), `hpml-lab train --batch-sise 8`.\n\n"
        "```python\nfrom hpml_lab import NoSuchName\n```\n"
    )
    problems, _ = check_docs([doc])
    text = "\n".join(problems)
    for expected in (
        "no target 'reprot'",
        "--proflie",
        "--containr",
        "hpml_lab.nope: does not import",
        "--epochz",
        "invalid choice: 'bogus'",
        "bash -n",
        "missing.md, which does not exist",
        "--batch-sise",
        "hpml_lab has no NoSuchName",
        "#nowhere, but bad.md has no such heading",
    ):
        assert expected in text, (expected, problems)
    assert len(problems) == 11, problems


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("make gpu-check STAGE=tests   # on the GPU", [["make", "gpu-check", "STAGE=tests"]]),
        (
            "PYTHONPATH=. python -m hpml_lab --epochs 1 && make test",
            [["python", "-m", "hpml_lab", "--epochs", "1"], ["make", "test"]],
        ),
        ("torchrun --standalone \\\n  -m hpml_lab ...", [["torchrun", "--standalone", "-m", "hpml_lab"]]),
        ("#SBATCH --time=01:00\ncd $X; hpml-lab tasks", [["cd", "$X"], ["hpml-lab", "tasks"]]),
    ],
)
def test_simple_commands(text, words):
    assert simple_commands(text) == words


def test_the_readme_task_table_names_every_task_and_its_slurm_command_writes_a_job(tmp_path, monkeypatch):
    """Each task's row gives a command that writes a job for the lab's settings (not only one that parses)."""
    from hpml_lab.report import cli, tasks

    monkeypatch.chdir(tmp_path)
    rows = [
        line for line in (ROOT / "README.md").read_text().split("\n") if re.match(r"^\| [a-z0-9]+ \| `", line)
    ]
    table = {row.split("|")[1].strip(): row for row in rows}
    assert set(table) == set(tasks.TASKS), set(table) ^ set(tasks.TASKS)
    for task, row in table.items():
        command = re.findall(r"`(hpml-lab slurm [^`]+)`", row)
        assert len(command) == 1, row
        argv = shlex.split(command[0])[1:]
        assert argv[1] == task and "--profile" not in argv  # the default profile: full, the lab's settings
        assert cli.main([*argv, "-o", str(tmp_path / f"{task}.sbatch")]) == 0, row
        assert "--profile full" in (tmp_path / f"{task}.sbatch").read_text()


def test_the_readme_task_table_is_the_one_the_tasks_give():
    """Adding a task touches its folder, notebook and tests only: the README's table is printed from the
    TASKs."""
    from hpml_lab.report import tasks

    block = tasks.table_in((ROOT / "README.md").read_text())
    assert block is not None, (
        f"README.md lost its task table markers ({tasks.TABLE_BEGIN!r} ... {tasks.TABLE_END!r})"
    )
    assert block == tasks.markdown_table(), (
        "README.md's task table is not what the TASKs give: run `hpml-lab tasks --markdown README.md`"
    )


def test_hpml_lab_tasks_markdown_rewrites_only_the_table_and_takes_a_new_task(tmp_path, monkeypatch, capsys):
    from hpml_lab.protocol import Task
    from hpml_lab.report import cli, tasks

    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text()
    readme.write_text(text)
    new = Task("c9", "c9_precision.ipynb", "C9: bf16 vs fp32 | mixed", order=9, slurm="--gpus 2")
    monkeypatch.setattr(tasks, "TASKS", {**tasks.TASKS, "c9": new})
    assert (
        cli.main(["tasks", "--markdown", str(readme)]) == 0
    )  # the table an earlier TASK set wrote: replaced
    assert "task table rewritten" in capsys.readouterr().out
    after = readme.read_text()
    assert after.split(tasks.TABLE_BEGIN)[0] == text.split(tasks.TABLE_BEGIN)[0]  # the rest is left as it was
    assert (
        after.split(tasks.TABLE_END)[1].split("\n", 1)[1] == text.split(tasks.TABLE_END)[1].split("\n", 1)[1]
    )
    row = (
        "| c9 | `c9_precision.ipynb` | bf16 vs fp32 \\| mixed"
        " | `hpml-lab slurm c9 --gpus 2 -p data_root=$SCRATCH/data` |"
    )
    assert row in after.splitlines()
    assert cli.main(["tasks", "--markdown"]) == 0
    assert capsys.readouterr().out.strip() == tasks.table_in(after)
    assert cli.main(["tasks", "--markdown", str(readme)]) == 0
    assert "already up to date" in capsys.readouterr().out
    (tmp_path / "plain.md").write_text("no markers\n")
    assert cli.main(["tasks", "--markdown", str(tmp_path / "plain.md")]) == 2


def test_tasks_markdown_never_overwrites_a_table_edited_by_hand(tmp_path, monkeypatch, capsys):
    """A row reworded by hand (or a table typed without the checksum hpml-lab writes) is refused in one line
    and nothing is written; --force replaces it and keeps the edited file beside it, saying where."""
    from hpml_lab.report import cli, tasks

    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text()
    edited = text.replace("| c1 | `c1_training.ipynb` |", "| c1 | `my_c1.ipynb` |")
    assert edited != text
    readme.write_text(edited)
    assert cli.main(["tasks", "--markdown", str(readme)]) == 2
    err = capsys.readouterr().err
    assert "edited by hand" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert readme.read_text() == edited and not list(tmp_path.glob("*.edited*"))
    assert cli.main(["tasks", "--markdown", str(readme), "--force"]) == 0
    out = capsys.readouterr().out
    assert f"kept as {tmp_path / 'README.md.edited'}" in out
    assert (tmp_path / "README.md.edited").read_text() == edited
    assert tasks.table_in(readme.read_text()) == tasks.markdown_table()
    # a table without a checksum (pasted by hand) that already is the TASKs' own is only signed, not refused
    unsigned = text.replace(text[text.index(tasks.TABLE_END) :].split("\n", 1)[0], tasks.TABLE_END + " -->")
    readme.write_text(unsigned)
    assert cli.main(["tasks", "--markdown", str(readme)]) == 0
    assert "checksum" in readme.read_text() and not (tmp_path / "README.md.edited-2").exists()


def quick_start_lines(readme: str) -> list[str]:
    """The command lines of the first shell block under README.md's '## Quick start', comments dropped."""
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


# what the quick-start test copies of the checkout: everything a clone holds that the commands read
CLONE = ("Makefile", "pyproject.toml", "setup.py", "constraints.txt", "README.md", "hpml_lab", "notebooks")


@pytest.mark.slow
def test_the_readme_quick_start_works_word_for_word_in_a_fresh_clone(tmp_path):
    """README.md's quick-start lines, run in order in a fresh copy of the checkout (no data/, results/ or
    reports/; the files' times kept) that shares this checkout's environment as its .venv, so that `make
    setup` runs and finds it up to date (the install itself is make setup's own, which CI's first step runs).
    Each line exits 0 as written; an `hpml-lab run` line gets `--profile tiny` appended to keep the suite
    quick (its data are still the default's, written at their full size). The task's run writes the missing
    synthetic CIFAR-10 first and says so in one line, then its report; no more than 25 s pass without a line
    (the commands aim at 20)."""
    import os
    import shutil
    import sys
    import time

    venv = Path(sys.executable).parent.parent
    if not (venv / ".hpml-installed").is_file():
        pytest.skip(f"{venv} was not made by make setup (no .hpml-installed)")
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in CLONE:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, clone / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, clone / name)
    (clone / ".venv").symlink_to(venv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPML_") and k != "VIRTUAL_ENV"}
    if subprocess.run(["make", "-q", "setup"], cwd=clone, env=env, capture_output=True).returncode != 0:
        pytest.skip("this environment is older than pyproject.toml or constraints.txt: run make setup first")
    lines = quick_start_lines((ROOT / "README.md").read_text())
    assert lines[0] == "make setup" and any("hpml-lab run c1" in line for line in lines), lines
    for line in lines:
        command = line + (" --profile tiny" if "hpml-lab run " in line else "")
        p = subprocess.Popen(
            ["bash", "-c", command],
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        said, last, gaps = [], time.monotonic(), []
        for out in p.stdout:
            now = time.monotonic()
            gaps.append(now - last)
            said.append(out.rstrip("\n"))
            last = now
        assert p.wait(timeout=600) == 0, f"{line}:\n" + "\n".join(said[-30:])
        assert max(gaps, default=0) <= 25, (line, max(gaps), said)
        if "hpml-lab run c1" in line:
            assert said[0].startswith(
                "data: no CIFAR-10 in data/ (the default data folder): writing a synthetic"
            )
            assert any(s.startswith("wrote synthetic CIFAR-10 (50000 train + 10000 test") for s in said)
            assert said[-1].startswith("[1/1] c1 ... ok in "), said
    assert (clone / "data" / "cifar-10-batches-py" / "SYNTHETIC.json").is_file()
    page = (clone / "reports" / "c1.html").read_text()
    assert "<b>profile:</b> tiny (a demonstration)" in page and "<b>data:</b> synthetic CIFAR-10" in page


def test_a_signature_is_no_hex_a_reader_takes_for_a_commit_and_old_ones_still_read():
    """The README's table checksum read as a commit hash ('899ee82298d2'): it is base-32 now; a file signed
    with the old hex digits is still recognised as hpml-lab's own, not refused as edited."""
    import hashlib
    import re

    from hpml_lab.report import written

    body = "line one\nline two\n"
    new = written.signed(body)
    assert written.unedited(new) and not re.search(r"\b[0-9a-f]{7,40}\b", new.splitlines()[-1])
    old = body + f"# written by hpml-lab: checksum {hashlib.sha256(body.encode()).hexdigest()[:12]}\n"
    assert written.unedited(old) and not written.unedited(old.replace("one", "1"))
    readme = (ROOT / "README.md").read_text()
    assert not re.search(r"\b[0-9a-f]{7,40}\b", readme)
