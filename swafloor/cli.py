"""The ``swafloor`` command line. Each subcommand lives in :mod:`swafloor.commands` as a module with
``register(subparsers)``, which adds its parser and sets ``handler`` (``args -> exit code``).

Exit codes: 0 success; 1 a check failed (a theorem contradicted, a divergence found); 2 bad arguments
or bad input (one line on stderr naming the problem); 3 a solver answered unknown.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from swafloor import __version__

# Subcommand modules under swafloor.commands, in the order ``--help`` lists them.
COMMANDS = ("prove", "floor", "explain", "simulate", "fuzz", "replay", "bench")


class UsageError(Exception):
    """Bad arguments or input: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="swafloor", description="Formally checked sizing of sliding-window KV-cache pools.")
    parser.add_argument("--version", action="version", version=f"swafloor {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"swafloor.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"swafloor.commands.{name}":
                raise
            continue  # a subcommand not built yet
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from swafloor.reference import ConfigError, SwafloorError

    try:
        args = build_parser().parse_args(argv)
        return int(args.handler(args))
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except (ConfigError, SwafloorError) as exc:
        print(f"swafloor: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
