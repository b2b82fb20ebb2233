"""The lab tasks: id -> notebook, title and the parameter profiles, built from the tasks' own folders.

    hpml-lab tasks          # lists them
    hpml-lab tasks --markdown            # the README's task table, from the TASKs
    hpml-lab tasks --markdown README.md  # rewrites that table in README.md (between its two markers)
    hpml-lab run c1 --profile smoke

A new lab task is one folder, hpml_lab/studies/<task_id>/, whose __init__.py holds its `TASK` (a
hpml_lab.protocol.Task: id, title, notebook, lab order, profiles, settings, what the GPU plan needs), plus its
notebook: `TASKS` is hpml_lab.studies.registry(), in lab order. No task is listed here.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..config import ConfigError
from ..protocol import FULL_LAB, GPU, PROFILES, SMOKE_LR, TINY, Task  # noqa: F401 (re-exported)
from ..studies import registry

TASKS: dict[str, Task] = registry()


def register(task: Task) -> Task:
    """Add a task at run time (tests, experiments); an id registered twice is refused (the way models
    register)."""
    if task.id in TASKS:
        raise ConfigError(f"task {task.id!r} is registered twice")
    TASKS[task.id] = task
    return task


def get(task_id: str) -> Task:
    if task_id not in TASKS:
        raise ConfigError(f"unknown task {task_id!r}; valid tasks: {', '.join(TASKS)} (see `hpml-lab tasks`)")
    return TASKS[task_id]


# The README's task table lies between these two lines; `hpml-lab tasks --markdown README.md` rewrites what is
# between them, and tests/unit/test_docs_commands.py checks that it is what the TASKs give.
TABLE_BEGIN = (
    "<!-- task table: written by `hpml-lab tasks --markdown README.md` from each TASK; edit those -->"
)
# then, as written, "; checksum sha256 <12 base-32 characters> -->": what a hand edit changes
TABLE_END = "<!-- end of the task table"
_END = re.compile(re.escape(TABLE_END) + r"(?:; checksum (?:sha256 )?([0-9a-z]{12}))? -->")


def markdown_table(found: dict[str, Task] | None = None) -> str:
    """The task table for a student: each task's id, notebook, what it answers (its title, less a "C1: " that
    repeats the id) and the `hpml-lab slurm` command that writes a job for the lab's settings (its TASK's
    `slurm` options), in lab order."""
    rows = [
        "| task | notebook | what it covers | lab's settings on a GPU node (Slurm) |",
        "|---|---|---|---|",
    ]
    for t in (TASKS if found is None else found).values():
        what = re.sub(rf"^{re.escape(t.id)}: ", "", t.title, flags=re.IGNORECASE).replace("|", "\\|")
        command = " ".join(x for x in ("hpml-lab slurm", t.id, t.slurm, "-p data_root=$SCRATCH/data") if x)
        rows.append(f"| {t.id} | `{t.notebook}` | {what} | `{command}` |")
    return "\n".join(rows)


def table_in(text: str) -> str | None:
    """The task table between the markers in a README's text (None: no markers)."""
    if TABLE_BEGIN not in text or not _END.search(text.split(TABLE_BEGIN, 1)[1]):
        return None
    return text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip("\n")


def _edited(text: str) -> bool:
    """True when the table between the markers is not the one `hpml-lab tasks --markdown` wrote there: its end
    marker's checksum differs from the table's, or the marker has none (a table typed or pasted by hand)."""
    from .written import matches

    m = _END.search(text.split(TABLE_BEGIN, 1)[1])
    return not matches(m.group(1), table_in(text) or "")


def write_table(path: str | Path, force: bool = False, say=print) -> bool:
    """Rewrite the task table between the markers in `path` (README.md) from the TASKs; True if it changed. A
    table there that was edited by hand (or written by hand) is refused (ConfigError, nothing written), or
    with `force` the file is first kept as NAME.edited and said through `say`."""
    from ..io import atomic_write_text
    from .written import digest, kept_copy

    path = Path(path)
    text = path.read_text()
    if table_in(text) is None:
        raise ConfigError(
            f"{path} has no task table markers: put {TABLE_BEGIN!r} and '{TABLE_END} -->' on lines of their "
            f"own"
        )
    table = markdown_table()
    head, rest = text.split(TABLE_BEGIN, 1)
    tail = rest[_END.search(rest).end() :]
    new = f"{head}{TABLE_BEGIN}\n{table}\n{TABLE_END}; checksum sha256 {digest(table)} -->{tail}"
    if new == text:
        return False
    if _edited(text) and table_in(text) != table:
        if not force:
            raise ConfigError(
                f"the task table in {path} was edited by hand since hpml-lab wrote it: nothing written; edit "
                f"the TASKs (hpml_lab/studies/<task>/__init__.py) instead, or add --force to replace it (the "
                f"file is then kept as {kept_copy(path).name})"
            )
        copy = kept_copy(path)
        atomic_write_text(copy, text)
        say(f"your edited {path.name} is kept as {copy}")
    atomic_write_text(path, new, follow_links=True)
    return True
