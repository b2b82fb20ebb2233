"""`python -m hpml_lab`: train one run from flags (every RunConfig field is a flag); torchrun starts one per rank.

    python -m hpml_lab --epochs 2 --batch-size 64 --subset 2048 --save-model model.pt
    torchrun --standalone --nproc-per-node=2 -m hpml_lab --epochs 2 --batch-size 64

The code is hpml_lab.training.main; `hpml-lab` (hpml_lab.report.cli) is the command for tasks and reports.
"""
import sys

from hpml_lab.training import main

if __name__ == "__main__":
    sys.exit(main())
