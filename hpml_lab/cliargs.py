"""The command lines' argument parser: an error (a missing or invalid option, an unknown argument) is one line
on stderr and exit status 2, never argparse's usage block.

    from hpml_lab.cliargs import OneLineParser
    p = OneLineParser(prog="hpml-lab")     # subparsers made from it are OneLineParsers too
    print(f"error: {one_line(e)}", file=sys.stderr)   # a path with a newline in it stays one line
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose error() prints `PROG: error: MESSAGE (PROG --help lists the options)`,
    one line, and exits with status 2; --help is unchanged."""

    def error(self, message: str) -> NoReturn:
        text = one_line(message)[:300]
        sys.stderr.write(f"{self.prog}: error: {text} ({self.prog} --help lists the options)\n")
        sys.exit(2)


def one_line(message: object) -> str:
    """An error message as one line: a newline or other control character inside it (from a path or a value
    the user gave) is shown escaped, as Python writes it in a string, so one error is always one line."""
    text = str(message).rstrip("\n")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
