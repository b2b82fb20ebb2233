"""What the questions report (Lab 2 Q1-Q4) concludes, computed from questions.answers()'s table: counts read from
the model and from real optimizers after one step, each an exact count (provenance "counted": no n, no spread).

    from hpml_lab.studies import questions, questions_answers
    qa, flags = questions_answers.conclude(cfg, questions.answers(cfg.model))
"""

from __future__ import annotations

import pandas as pd

from .. import sanity
from ..answers import Answer, Number


def conclude(cfg, table: pd.DataFrame) -> tuple[list[Answer], list[sanity.Flag]]:
    """Q1-Q4 as answers: counts read from the model and from real optimizers after one step."""
    v = table.set_index("quantity")["value"]
    main, sc = (
        int(v["conv layers, main path (stem + 2 per BasicBlock)"]),
        int(v["conv layers, 1x1 projection shortcuts"]),
    )
    sgd = {k.split(": ", 1)[1]: int(x) for k, x in v.items() if k.startswith("SGD")}
    adam = {k.split(": ", 1)[1]: int(x) for k, x in v.items() if k.startswith("Adam")}
    src = f"counted in {cfg.model}"

    def n(name, value, unit="values"):  # exact counts: no n, no spread (answers.PROVENANCE)
        return Number(name, value, unit, "counted", source=src)

    def size(name, values):
        return Number(f"{name} as float32", values * 4 / 1e6, "MB", "counted", source="values x 4 bytes")

    def mb(x):
        return f"{x * 4 / 1e6:.1f} MB as float32"

    mom = sgd.get("optimizer state momentum_buffer", 0)
    return [
        Answer(
            "Q1: how many convolutional layers?",
            f"{main + sc} counting the {sc} 1x1 projection shortcuts ({main} on the "
            "main path); the classifier is linear, not counted.",
            "answered",
            [
                n("conv layers", main + sc, "layers"),
                n("conv layers, main path", main, "layers"),
                n("1x1 shortcut convs", sc, "layers"),
            ],
        ),
        Answer(
            "Q2: input size of the last linear layer?",
            f"{int(v['input features of the last linear layer'])} features.",
            "answered",
            [n("last linear in_features", int(v["input features of the last linear layer"]), "")],
        ),
        Answer(
            "Q3: trainable parameters and gradients with SGD?",
            f"{sgd['parameters']:,} parameters and {sgd['gradients']:,} gradients ({mb(sgd['parameters'])} each); "
            f"momentum 0.9 adds a {mom:,}-value momentum buffer, which is optimizer state, not gradients.",
            "answered",
            [
                n("SGD parameters", sgd["parameters"]),
                n("SGD gradients", sgd["gradients"]),
                n("SGD momentum buffer", mom),
                size("SGD parameters", sgd["parameters"]),
                Number("momentum", 0.9, "", "setting", source="the lab's SGD momentum"),
            ],
        ),
        Answer(
            "Q4: the same with Adam?",
            f"{adam['parameters']:,} parameters, {adam['gradients']:,} gradients, and optimizer state of "
            f"{adam['optimizer state exp_avg']:,} (exp_avg) + {adam['optimizer state exp_avg_sq']:,} (exp_avg_sq) "
            f"values ({mb(adam['parameters'])} each), plus {adam['optimizer state step']} step counters.",
            "answered",
            [
                n("Adam parameters", adam["parameters"]),
                n("Adam gradients", adam["gradients"]),
                n("Adam exp_avg", adam["optimizer state exp_avg"]),
                n("Adam exp_avg_sq", adam["optimizer state exp_avg_sq"]),
                size("Adam parameters", adam["parameters"]),
                n("Adam step counters", adam["optimizer state step"], "counters"),
            ],
        ),
    ], [sanity.stand_in(cfg)] if cfg.model != sanity.LAB["model"] else []
