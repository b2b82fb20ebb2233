"""How the pages a grader reads look: one type and table style for the reports, the index and the bundle; the
answer box right after the report's title; each answer as one headline line with its details under it.

    css = pages.PAGE_CSS                            # in the <head> of a report, the index and the bundle
    nb = pages.box_after_title(nb, box_html)        # the notebook with the answer box after its title
    head, details = pages.headline(answer_dict)     # the line a grader reads first, and the rest
    pages.mark(True)                                # '✓' (a table's booleans: never Python's True/False)
"""

from __future__ import annotations

import html
import re
from typing import Any

TRUE, FALSE = "✓", "✗"

# One look for every page: the system's sans-serif type (on a report page the answer box inherits JupyterLab's
# own, so the box and the notebook's outputs share it), tables left-aligned with their text at the left
# (JupyterLab's pages right-align every cell, which put the environment table's values at the far right),
# numbers right-aligned where a table marks them.
PAGE_CSS = """
:root{--hpml-font:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
body{font-family:var(--hpml-font);line-height:1.45;color:#1f2328}
main,body>.hpml-page{max-width:1100px;margin:0 auto;padding:0 16px;box-sizing:border-box}
img{max-width:100%;height:auto}
pre{white-space:pre-wrap;overflow-wrap:anywhere}
.hpml-answer{font-size:15px;border:2px solid #1a7f37;border-radius:6px;
  padding:10px 16px;margin:12px 0 18px;background:#f6f8fa}
.hpml-answer h2{margin:0 0 6px;font-size:1.2em}
.hpml-answer ul.hpml-items{list-style:none;padding-left:0;margin:0}
.hpml-answer li.hpml-item{margin:0 0 12px}
.hpml-answer .hpml-question{font-size:0.9em;color:#57606a;margin:0}
.hpml-answer .hpml-headline{font-size:1.08em;font-weight:600;margin:2px 0 4px}
.hpml-answer .hpml-details{margin:0 0 4px}
.hpml-answer .hpml-background{margin:0 0 4px;font-size:0.9em;color:#57606a}
.hpml-answer details{font-size:0.9em;color:#444}
.hpml-answer .hpml-legend{font-size:0.85em;color:#57606a}
.hpml-notice{border:2px solid #c60;background:#fff4e5;padding:8px 12px;margin:8px 0;border-radius:4px}
.hpml-banner{border:2px solid #cf222e;background:#ffebe9;padding:8px 12px;margin:8px 0;border-radius:4px}
table{border-collapse:collapse}
.jp-RenderedHTMLCommon table,:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon table{margin-left:0;
  margin-right:auto;table-layout:auto}
.jp-RenderedHTMLCommon td,.jp-RenderedHTMLCommon th,:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td,
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon th,:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon tr,
td,th{text-align:left;vertical-align:top}
td.hpml-num,th.hpml-num{text-align:right;font-variant-numeric:tabular-nums}
.hpml-scroll{overflow-x:auto;max-width:100%}
@media (max-width:600px){body{margin:0}main,body>.hpml-page{padding:0 8px}
  .hpml-answer{padding:8px 10px}table{font-size:13px;display:block;overflow-x:auto;max-width:100%}
  code{overflow-wrap:anywhere}
  table.hpml-index,table.hpml-index tbody,table.hpml-index tr,table.hpml-index td{display:block;width:auto}
  table.hpml-index tr:first-child{display:none}table.hpml-index tr{border:1px solid #d0d7de;margin:0 0 10px}
  table.hpml-index td{border:none;padding:2px 8px}table.hpml-index td.hpml-head{min-width:0}}
"""


def mark(value: Any) -> Any:
    """A boolean as a reader sees it in a table: ✓ for True, ✗ for False; anything else as it is."""
    if value is True or (type(value).__name__ == "bool_" and bool(value)):
        return TRUE
    if value is False or (type(value).__name__ == "bool_" and not bool(value)):
        return FALSE
    return value


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


_SLOT = re.compile(r"&lt;span data-(number|verdict)=&quot;(.*?)&quot;&gt;")


def finding_html(stored: str) -> str:
    """A finding's stored html made safe to show: everything escaped except the slots findings.py writes
    (<span data-number="NAME">, <span data-verdict="NAME">, <span data-id> and their </span>). The record is a
    file that may have been edited or damaged; a <script> in it stays text."""
    text = html.escape(html.unescape(str(stored)))
    text = text.replace("&lt;span data-id&gt;", "<span data-id>")
    return _SLOT.sub(r'<span data-\1="\2">', text).replace("&lt;/span&gt;", "</span>")


def _text(value: Any, key: str = "plain") -> str:
    """A record's finding as text: a string, or a finding as the record holds it ({"plain", "html"})."""
    if isinstance(value, dict):
        got = str(value.get(key) or "")
        return finding_html(got) if key == "html" else got
    return str(value or "") if key == "plain" else html.escape(str(value or ""))


def headline(answer: dict[str, Any], key: str = "plain") -> tuple[str, str]:
    """(headline, details) of one answer of a record: the record's own `headline` and `details` (findings.py's
    Answer), else, for an answer written as one paragraph (a legacy record), its first sentence and the rest.
    key="html": each as HTML (its numbers tagged <span data-number>; a legacy answer's text escaped)."""
    if answer.get("headline") and not answer.get("legacy"):
        details = answer.get("details") or []
        if isinstance(details, (str, dict)):
            details = [details]
        return _text(answer["headline"], key), " ".join(_text(d, key) for d in details)
    text = str(answer.get("text", "")).strip()
    parts = _SENTENCE_END.split(text, maxsplit=1)
    head, rest = parts[0].strip(), parts[1].strip() if len(parts) > 1 else ""
    return (html.escape(head), html.escape(rest)) if key == "html" else (head, rest)


def box_after_title(nb, box_html: str):
    """The notebook with the answer box as a cell right after its title (the first markdown cell's `# ` line;
    the rest of that cell follows the box), so the page reads: title, answer, then the notebook. A notebook
    without a title gets the box first. Returns the notebook."""
    import nbformat

    box = nbformat.v4.new_code_cell(
        "", outputs=[nbformat.v4.new_output("display_data", data={"text/html": box_html})]
    )
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.split("\n")
        at = next((j for j, line in enumerate(lines) if line.startswith("# ")), None)
        if at is None:
            break
        title = nbformat.v4.new_markdown_cell("\n".join(lines[: at + 1]))
        rest = "\n".join(lines[at + 1 :]).strip()
        nb.cells[i : i + 1] = [title, box] + ([nbformat.v4.new_markdown_cell(rest)] if rest else [])
        return nb
    nb.cells.insert(0, box)
    return nb


# The top of every page: the machine, the data and the profile, then for a demonstration (a smoke or tiny run)
# a banner saying that it does not answer the lab's questions; the index and the bundle say it too.
DEMONSTRATION_PROFILES = ("smoke", "tiny")


def demonstration(profile: str) -> bool:
    """A run at a demonstration profile: a few batches (smoke) or seconds (tiny), not the lab's settings."""
    return profile in DEMONSTRATION_PROFILES


DEMONSTRATION = (
    "<b>A demonstration, not an answer to the lab's questions</b>: the {profile} profile runs a few batches "
    "to show every step working; do not hand it in. The answer: <code>hpml-lab run {task} --profile "
    "full</code>{where}."
)


def top_html(
    task: str, machine: str, data: str, profile: str, reads_data: bool = True, times: bool = True
) -> str:
    """The lines at the top of a report, above its introduction: machine, data (synthetic or real, or none
    read) and profile, then the demonstration banner where the profile is one; it sends the answer to the
    real data where the study reads data, and to a GPU where it states a time (the questions' counts need
    neither)."""
    where = ", ".join((["on the real data"] if reads_data else []) + (["on a GPU"] if times else []))
    line = (
        # the machine's name (its model, its core count) names it, as the environment table does: no finding
        f"<p class='hpml-context'><b>Machine:</b> <span data-id>{html.escape(machine)}</span> &middot; "
        f"<b>data:</b> {html.escape(data)} &middot; <b>profile:</b> {html.escape(profile)}"
        + (" (a demonstration)" if demonstration(profile) else "")
        + "</p>"
    )
    banner = (
        "<p class='hpml-banner'>"
        + DEMONSTRATION.format(
            profile=html.escape(profile), task=html.escape(task), where=f" {where}" if where else ""
        )
        + "</p>"
        if demonstration(profile)
        else ""
    )
    return line + banner
