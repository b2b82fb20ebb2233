"""Figures on the page: saved under figures/ and shown with their alt text (read off the figure) and the
caption the drawing code wrote (plots.captioned), both held in the page's record for the claims check; a
stand-in model named in the figure's title.

A notebook reaches save_figure as nb.save_figure (report/notebook.py re-exports it).
"""

from __future__ import annotations

import html
from typing import Any

from .. import sanity
from ..config import output_path
from .page_record import display, hold_figure

_RUN: dict[str, Any] = {}  # the model this kernel's report runs (config), for figure titles


def stand_in_label(model: str | None, lab_model: str = sanity.LAB["model"]) -> str:
    """'model resnet_tiny, a stand-in for the lab's resnet18', or '' for the lab's model (or its adjusted
    form)."""
    if not model or model == lab_model or model.startswith(lab_model + "_"):
        return ""
    return f"model {model}, a stand-in for the lab's {lab_model}"


def alt_text(fig, name: str) -> str:
    """What a figure shows, for readers who cannot see it: each panel's title, axes and legend entries."""
    parts = []
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_text():
        parts.append(sup.get_text().replace("\n", " "))
    for ax in fig.get_axes():
        if not ax.get_visible() or not (ax.get_xlabel() or ax.get_ylabel() or ax.get_title()):
            continue
        what = ax.get_title() or "a panel"
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        axes = f"{ax.get_ylabel() or 'value'} " + (
            f"against {ax.get_xlabel()}" if ax.get_xlabel() else f"for {', '.join(ticks)}" if ticks else ""
        )
        legend = ax.get_legend()
        names = [t.get_text() for t in legend.get_texts()] if legend else []
        parts.append(f"{what}: {axes}" + (f" ({', '.join(names)})" if names else ""))
    # one legend for all panels (plots.figure_legend)
    shared = [t.get_text() for leg in getattr(fig, "legends", []) for t in leg.get_texts()]
    if shared:
        parts.append(f"legend: {', '.join(shared)}")
    return f"Figure {name}: " + ("; ".join(parts) if parts else "no labelled axes") + "."


def save_figure(fig, name: str, folder: str = "figures", alt: str = "") -> None:
    """Save under figures/<name>.png (in the project, or HPML_OUTPUT_DIR) and show it with alt text (`alt`,
    else what alt_text reads off the figure); a stand-in model is named in the figure's title.

    Returns nothing, so a cell that ends with it shows the figure once and no path."""
    import base64
    import io

    label = stand_in_label(_RUN.get("model"))
    if label:
        sup = getattr(fig, "_suptitle", None)
        head = sup.get_text() if sup is not None else ""
        if label not in head:
            fig.suptitle((head + "\n" if head else "") + f"({label})", fontsize=9)
            engine = fig.get_layout_engine()
            if type(engine).__name__ != "ConstrainedLayoutEngine":  # constrained layout makes room by itself
                # make room for the caption: it was added after the layout and sat on the plot
                fig.tight_layout()
    alt = alt or alt_text(fig, name)
    caption = getattr(
        fig, "hpml_caption", ""
    )  # plots.captioned: what is drawn, said by the code that drew it
    # its labels and caption, held in the record: the claims check reads the page's
    hold_figure(name, alt, caption)
    path = output_path(folder) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the kernel
        return
    if get_ipython() is None:  # a plain script: the file is the figure
        return
    from IPython.display import HTML

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode()
    display(
        HTML(
            f'<img src="data:image/png;base64,{data}" data-figure="{html.escape(name)}" '
            f'alt="{html.escape(alt)}">'
        )
    )
    if caption:
        display(
            HTML(f'<p class="caption" data-figure="{html.escape(name)}"><i>{html.escape(caption)}</i></p>')
        )
    import matplotlib.pyplot as plt

    plt.close(fig)  # shown above, with its alt text: the inline backend would show it again without
