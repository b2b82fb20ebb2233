"""Lab 2 written questions Q1 to Q4, answered by inspecting the model and real optimizers.

    hpml-lab run questions
    from hpml_lab.studies.questions import study as questions
    questions.answers("resnet18")     # a DataFrame: question, quantity, value, how it was counted

Q1 conv layers (convention stated: main-path 3x3 convs vs 1x1 projection shortcuts),
Q2 input size of the last linear layer, Q3 trainable parameters and gradients with SGD,
Q4 the same with Adam. Gradients and optimizer state are counted after one real
training step, so they exist; parameters, gradients and each kind of optimizer state
are kept apart and named (SGD with momentum keeps a momentum buffer; Adam keeps
exp_avg and exp_avg_sq, the first and second moments, plus a scalar step count per tensor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from ... import models, results
from ...config import RunConfig
from ...step import build_optimizer, train_step


def conv_layers(model: nn.Module) -> dict[str, int]:
    """Conv2d modules, split into the 1x1 projection shortcuts and the rest (stem + blocks)."""
    shortcut = main = 0
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            if "shortcut" in name:
                shortcut += 1
            else:
                main += 1
    linear = sum(isinstance(m, nn.Linear) for m in model.modules())
    return {"main": main, "shortcut": shortcut, "total": main + shortcut, "linear": linear}


def last_linear(model: nn.Module) -> nn.Linear:
    return [m for m in model.modules() if isinstance(m, nn.Linear)][-1]


def memory_after_one_step(
    model: nn.Module,
    optimizer_name: str,
    lr: float = 0.1,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    batch: int = 2,
    size: int = 32,
) -> dict[str, int]:
    """Element counts of trainable parameters, gradients and each optimizer-state entry after one real
    step."""
    torch.manual_seed(0)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = build_optimizer(
        RunConfig(optimizer=optimizer_name, lr=lr, momentum=momentum, weight_decay=weight_decay), params
    )
    model.train()
    x, y = torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,))
    train_step(model, opt, nn.CrossEntropyLoss(), x, y, None, torch.device("cpu"))
    out: dict[str, int] = {
        "parameters": sum(p.numel() for p in params),
        "gradients": sum(p.grad.numel() for p in params if p.grad is not None),
    }
    for p in params:
        for key, value in opt.state[p].items():
            if torch.is_tensor(value):
                out[f"state:{key}"] = out.get(f"state:{key}", 0) + value.numel()
    return out


def answers(model_name: str = "resnet18", norm: str = "bn", stem: str = "cifar") -> pd.DataFrame:
    """Q1 to Q4 as rows: question, quantity, value, note (how it was counted)."""
    model = models.build(model_name, num_classes=10, norm=norm, stem=stem)
    conv = conv_layers(model)
    lin = last_linear(model)
    rows: list[dict[str, Any]] = [
        {
            "question": "Q1",
            "quantity": "conv layers, main path (stem + 2 per BasicBlock)",
            "value": conv["main"],
            "note": "3x3 convolutions on the main path",
        },
        {
            "question": "Q1",
            "quantity": "conv layers, 1x1 projection shortcuts",
            "value": conv["shortcut"],
            "note": "where a stage changes width or stride",
        },
        {
            "question": "Q1",
            "quantity": "conv layers, all (answer, shortcuts counted)",
            "value": conv["total"],
            "note": f"{conv['main']} + {conv['shortcut']}; the classifier is a linear layer, not counted "
            f"(the '{conv['main'] + conv['linear']}-layer' name counts the main-path convs plus the linear)",
        },
        {
            "question": "Q2",
            "quantity": "input features of the last linear layer",
            "value": lin.in_features,
            "note": f"global average pool of the last stage: {lin.in_features} channels x 1 x 1",
        },
    ]
    for q, opt_name in (("Q3", "sgd"), ("Q4", "adam")):
        counts = memory_after_one_step(
            models.build(model_name, num_classes=10, norm=norm, stem=stem), opt_name
        )
        label = "SGD (momentum 0.9, the lab's default)" if opt_name == "sgd" else "Adam"
        for key, value in counts.items():
            note = {
                "parameters": "trainable weights and biases (requires_grad), one value each",
                "gradients": "one .grad value per trainable parameter after backward",
                "state:momentum_buffer": "SGD's momentum buffer (absent with momentum=0): optimizer state, "
                "not a gradient",
                "state:exp_avg": "Adam's first moment (running mean of gradients): optimizer state",
                "state:exp_avg_sq": "Adam's second moment (running mean of squared gradients): optimizer "
                "state",
                "state:step": "Adam's step count, one scalar per parameter tensor",
            }.get(key, "optimizer state")
            rows.append(
                {
                    "question": q,
                    "quantity": f"{label}: {key.replace('state:', 'optimizer state ')}",
                    "value": value,
                    "note": note,
                }
            )
    return pd.DataFrame(rows, columns=["question", "quantity", "value", "note"])


@dataclass
class QuestionsResult:
    """The answers table (question, quantity, value, note) and the meta.json written with it."""

    table: pd.DataFrame
    meta: dict[str, Any]


def run(cfg) -> QuestionsResult:
    """answers() for cfg.model, written to results/<task>/<run-id>/answers.csv with meta.json."""
    df = answers(cfg.model, cfg.norm, cfg.stem)
    run_dir = cfg.run_dir()
    meta = results.new_meta(
        cfg,
        "cpu",
        status="complete",
        note="counts after one real training step on a random batch of 2 (so gradients and state exist)",
    )
    meta["finished_at"] = meta["started_at"]
    results.write_derived(run_dir, {"answers": df}, meta)
    return QuestionsResult(df, meta)
