"""What the questions report (Lab 2 Q1-Q4) concludes, computed from questions.answers()'s table: counts read
from the model and from real optimizers after one step, each an exact count (provenance "counted": no n, no
spread).

    from hpml_lab.studies.questions import conclusion, study as questions
    qa, flags = conclusion.conclude(cfg, questions.answers(cfg.model))
"""

from __future__ import annotations

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...findings import Background, say


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

    def n(
        name, value, unit=""
    ):  # a count (the sentence names what it counts)  # exact counts: no n, no spread (answers.PROVENANCE)
        return Number(name, value, unit, "counted", source=src)

    def size(name, values):
        return Number(f"{name} as float32", values * 4 / 1e6, "MB", "counted", source="values x 4 bytes")

    mom = sgd.get("optimizer state momentum_buffer", 0)
    momentum = Number("momentum", 0.9, "", "setting", source="the lab's SGD momentum")
    sgd_p, adam_p = n("SGD parameters", sgd["parameters"]), n("Adam parameters", adam["parameters"])
    return [
        Answer(
            "Q1: how many convolutional layers?",
            # each headline in one breath, one number; the counts behind it in the details
            say(
                "{all}, the projection shortcuts included; the linear classifier is not counted",
                all=n("conv layers", main + sc, "layers"),
            ),
            [
                say(
                    "They are {sc} projection shortcuts (one-by-one convolutions) and {main} on the main "
                    "path",
                    sc=n("shortcut convs", sc),
                    main=n("conv layers, main path", main),
                )
            ],
            background=[
                Background(
                    "Convention: every Conv2d counts once, the shortcut convolutions included; the final "
                    "linear layer is not a convolution. The usual name of the network counts the main-path "
                    "convolutions plus the linear classifier."
                )
            ],
        ),
        Answer(
            "Q2: input size of the last linear layer?",
            say(
                "{k}",
                k=n("last linear in_features", int(v["input features of the last linear layer"]), "features"),
            ),
        ),
        Answer(
            "Q3: trainable parameters and gradients with SGD?",
            # one number a headline: where the counts differ, the gradients' count is the details'
            say(
                "{p} parameters and " + _as_many(sgd["gradients"], sgd["parameters"]) + " gradients", p=sgd_p
            ),
            [
                say(
                    # 'each' only where the two counts are one size (grade35a: false where they differ)
                    "{p} parameters and {g} gradients, {size} as float32 each"
                    if sgd["gradients"] == sgd["parameters"]
                    else "{p} parameters ({size} as float32) and {g} gradients",
                    p=sgd_p,
                    g=n("SGD gradients", sgd["gradients"]),
                    size=size("SGD parameters", sgd["parameters"]),
                ),
                say(
                    "Momentum {m} adds a momentum buffer of {buf} values, which is optimizer state, not "
                    "gradients",
                    m=momentum,
                    buf=n("SGD momentum buffer", mom),
                ),
            ],
        ),
        Answer(
            "Q4: the same with Adam?",
            say("{p} parameters, as many gradients, and twice as many values of optimizer state", p=adam_p)
            if adam["gradients"]
            == adam["optimizer state exp_avg"]
            == adam["optimizer state exp_avg_sq"]
            == adam["parameters"]
            else say(
                "{p} parameters, "
                + _as_many(adam["gradients"], adam["parameters"])
                + " gradients, plus optimizer state (the details count it)",
                p=adam_p,
            ),
            [
                say(
                    "{p} parameters, {g} gradients, and optimizer state of {m} (exp_avg) + {v} (exp_avg_sq) "
                    + (
                        "values ({size} as float32 each), plus {steps}"
                        if len({adam[k] for k in ADAM_ARRAYS}) == 1
                        else "values, plus {steps}; the parameters take {size} as float32"
                    ),
                    p=adam_p,
                    g=n("Adam gradients", adam["gradients"]),
                    m=n("Adam exp_avg", adam["optimizer state exp_avg"]),
                    v=n("Adam exp_avg_sq", adam["optimizer state exp_avg_sq"]),
                    size=size("Adam parameters", adam["parameters"]),
                    steps=n("Adam step counters", adam["optimizer state step"], "step counters"),
                ),
                say(
                    "In total Adam keeps {ratio} the parameter count in float values during training",
                    ratio=Number(
                        "Adam float values per parameter",
                        (
                            adam["parameters"]
                            + adam["gradients"]
                            + adam["optimizer state exp_avg"]
                            + adam["optimizer state exp_avg_sq"]
                        )
                        / adam["parameters"],
                        "x",
                        "counted",
                        source="(parameters + gradients + exp_avg + exp_avg_sq) / parameters",
                    ),
                ),
            ],
            [
                Background(
                    "Optimizer state is neither parameters nor gradients; plain SGD without momentum keeps "
                    "none."
                )
            ],
        ),
    ], [sanity.stand_in(cfg)] if cfg.model != sanity.LAB["model"] else []


# Adam's per-value arrays: one size each where every trainable value has a gradient and both moments
ADAM_ARRAYS = ("parameters", "gradients", "optimizer state exp_avg", "optimizer state exp_avg_sq")


def _as_many(count: int, parameters: int) -> str:
    """'as many', 'fewer' or 'more': a count of values (gradients) beside the parameters', in words."""
    return "as many" if count == parameters else "fewer" if count < parameters else "more"
