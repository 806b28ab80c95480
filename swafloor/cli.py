"""The ``swafloor`` command line. Each subcommand lives in :mod:`swafloor.commands` as a module with
``register(subparsers)``, which adds its parser and sets ``handler`` (``args -> exit code``).

Exit codes: 0 success; 1 a check failed (a theorem contradicted, a divergence found); 2 bad arguments
or bad input (one line on stderr naming the problem, ``swafloor COMMAND: message``, no class names); 3 a solver answered unknown; 4 ``simulate``'s
request deadlocked (the pool ran out of slots), ``serve-sim``'s workload deadlocked or livelocked; 130
interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from . import __version__

# Subcommand modules under swafloor.commands, in the order ``--help`` lists them.
COMMANDS = ("prove", "floor", "explain", "simulate", "serve-sim", "fuzz", "replay", "matrix", "bench", "docs", "check")


class UsageError(Exception):
    """Bad arguments or input: printed as one line, exit code 2, in the form ``swafloor COMMAND:
    message`` (:func:`error_line`). ``where`` is the command (default: the one that was parsed); a
    message may start with it already (``swafloor floor: ...``)."""

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.where = where


#: The longest error line printed; longer messages are cut (values in them are bounded already).
MAX_ERROR_CHARS = 500


def one_line(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``message`` as one bounded line (:func:`swafloor.reference.show.one_line`), cut to ``limit``."""
    from swafloor.reference.show import one_line as bounded_line

    return bounded_line(message, limit)


def error_line(where: str, message: str) -> str:
    """The one line every error is printed as: ``swafloor COMMAND: message`` (``where`` is the
    command's prog, e.g. ``swafloor floor`` or ``swafloor check trtllm``), bounded, never a Python
    class name in front of the message."""
    prefix = f"{where}: "
    return one_line(message if message.startswith(prefix) else prefix + message)


class _Parser(argparse.ArgumentParser):
    def parse_args(self, args=None, namespace=None):
        namespace, rest = self.parse_known_args(args, namespace)
        if rest:  # named by the command they were given to, not by the top-level parser
            raise UsageError(f"unrecognized arguments: {' '.join(rest)}", where=namespace.command_prog)
        return namespace

    def parse_known_args(self, args=None, namespace=None):
        namespace, rest = super().parse_known_args(args, namespace)
        if getattr(namespace, "command_prog", None) is None:  # the deepest parser returns first
            namespace.command_prog = self.prog  # the command a later error belongs to
        return namespace, rest

    def error(self, message: str) -> None:  # one line, exit 2
        raise UsageError(message, where=self.prog)

    def _get_values(self, action, arg_strings):
        # ``--window=--`` leaves argparse an empty list for a one-value option (it drops the "--"):
        # every such option must then say it expected one argument, not receive [].
        if action.nargs is None and action.option_strings and [a for a in arg_strings if a != "--"] == []:
            self.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
        return super()._get_values(action, arg_strings)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="swafloor", description="Formally checked sizing of sliding-window KV-cache pools.")
    parser.add_argument("--version", action="version", version=f"swafloor {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name in COMMANDS:
        importlib.import_module(f"swafloor.commands.{name.replace('-', '_')}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Bad arguments and typed swafloor errors print one line and return 2; Ctrl-C
    returns 130 (commands doing long work print a summary of what was done first)."""
    from swafloor.reference import SwafloorError

    where = "swafloor"  # the command, once parsed: every error line names it
    try:
        args = build_parser().parse_args(argv)
        where = args.command_prog
        return int(args.handler(args))
    except UsageError as exc:
        print(error_line(exc.where or where, str(exc)), file=sys.stderr)
        return 2
    except SwafloorError as exc:
        print(error_line(where, str(exc)), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("swafloor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `swafloor fuzz --list | head -1`: the reader left; no traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
