"""Entry point for `python -m hpml_lab.train` (and torchrun): the code is in hpml_lab.training.

    python -m hpml_lab.train --epochs 2 --batch-size 64 --subset 2048 --save-model model.pt

Kept as a separate module so that `hpml_lab.train` stays the function
`hpml_lab.training.train` for notebooks: import hpml_lab.training, not this file.
"""
import sys

from hpml_lab.training import main

if __name__ == "__main__":
    sys.exit(main())
