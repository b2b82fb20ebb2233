"""The command lines' argument parser: an error (a missing or invalid option, an unknown argument) is one line
on stderr and exit status 2, never argparse's usage block.

    from hpml_lab.cliargs import OneLineParser
    p = OneLineParser(prog="hpml-lab")     # subparsers made from it are OneLineParsers too
"""
from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose error() prints `PROG: error: MESSAGE (PROG --help lists the options)`,
    one line, and exits with status 2; --help is unchanged."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(str(message).split())[:300]  # one line, whatever argparse or a value put in it
        sys.stderr.write(f"{self.prog}: error: {text} ({self.prog} --help lists the options)\n")
        sys.exit(2)
