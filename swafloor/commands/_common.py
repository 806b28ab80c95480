"""Small helpers shared by subcommands: bounded argument types and JSON output.

Every numeric option is parsed by one of the types below, so every command rejects the same bad
values the same way, at parse time, with exit 2 and one line naming the option: not a number,
below the minimum, above a sane maximum (huge numbers would only exhaust memory or time later),
or not finite. Values are quoted in a bounded form, so a 5000-digit or multi-line argument still
gives one short line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from swafloor.reference.config import MAX_COUNT  # the largest count any option accepts, as in a Config
from swafloor.reference.show import bounded

#: The longest time budget (seconds) any option accepts: one day.
MAX_SECONDS = 86_400.0
#: The most worker processes ``--jobs`` may ask for.
MAX_JOBS = 256

_INT_TEXT = re.compile(r"[+-]?[0-9](?:_?[0-9])*")


def _show(text: str) -> str:
    return bounded(text, 40)


def int_in(minimum: int, maximum: int = MAX_COUNT):
    """An argparse type: an integer in ``[minimum, maximum]``, written in decimal."""

    def parse(text: str) -> int:
        stripped = text.strip() if isinstance(text, str) else ""
        if not _INT_TEXT.fullmatch(stripped):
            raise argparse.ArgumentTypeError(f"invalid int value: {_show(text)}")
        digits = len(stripped.lstrip("+-").replace("_", "").lstrip("0"))
        if digits > len(str(maximum)) + 1:  # never convert absurdly long numbers
            kind = "a negative" if stripped.startswith("-") else "a"
            raise argparse.ArgumentTypeError(
                f"must be between {minimum:,} and {maximum:,}, got {kind} {digits:,}-digit number"
            )
        value = int(stripped)
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be between {minimum:,} and {maximum:,}, got {value:,}")
        return value

    parse.__name__ = f"int in [{minimum}, {maximum}]"
    return parse


def int_at_least(minimum: int, maximum: int = MAX_COUNT):
    """An argparse type: an integer ``>= minimum`` (and at most ``maximum``, 10**18 by default)."""
    return int_in(minimum, maximum)


def float_in(minimum: float, maximum: float):
    """An argparse type: a finite float in ``[minimum, maximum]``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"invalid float value: {_show(text)}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {_show(text)}")
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be in [{minimum:g}, {maximum:g}], got {value:g}")
        return value

    parse.__name__ = "float"
    return parse


def writable_dir(text: str) -> Path:
    """An argparse type: a folder that exists and is writable, or that could be created (its nearest
    existing parent is a writable folder). Nothing is created here."""
    if not isinstance(text, str) or not text or "\x00" in text:
        raise argparse.ArgumentTypeError(f"not a usable folder name: {_show(text)}")
    path = Path(text)
    probe = path
    try:
        while not probe.exists():
            if probe.is_symlink():
                raise argparse.ArgumentTypeError(f"{_show(text)}: {_show(str(probe))} is a dangling link")
            if probe.parent == probe:
                break
            probe = probe.parent
        if not probe.is_dir():
            what = "is not a folder" if probe == path else f"cannot be created: {_show(str(probe))} is not a folder"
            raise argparse.ArgumentTypeError(f"{_show(text)} {what}")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{_show(text)}: {_show(str(probe))} is not writable")
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{_show(text)}: {exc.strerror or type(exc).__name__}") from None
    return path


def writable_file(text: str) -> Path:
    """An argparse type: a file to write: not a folder, in a folder that exists and is writable, with
    a name the file system accepts. Nothing is written here."""
    if not isinstance(text, str) or not text or "\x00" in text:
        raise argparse.ArgumentTypeError(f"not a usable file name: {_show(text)}")
    path = Path(text)
    if len(os.fsencode(path.name)) > 255 or len(os.fsencode(text)) > 4096:
        raise argparse.ArgumentTypeError(f"file name too long: {_show(text)}")
    folder = path.parent
    try:
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{_show(text)} is a folder")
        if path.is_fifo() or path.is_socket():  # opening one to write would wait for a reader forever
            raise argparse.ArgumentTypeError(f"{_show(text)} is not a regular file")
        if not folder.is_dir():
            why = "is not a folder" if folder.exists() else "does not exist"
            raise argparse.ArgumentTypeError(f"{_show(text)}: {_show(str(folder))} {why}")
        if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise argparse.ArgumentTypeError(f"{_show(text)} is not writable")
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{_show(text)}: {exc.strerror or type(exc).__name__}") from None
    return path


def add_window_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments that describe one sliding-window life cycle."""
    parser.add_argument("--window", type=int_at_least(1), required=True, help="window W in tokens (sinks excluded)")
    parser.add_argument("--tokens-per-block", type=int_at_least(1), required=True, help="tokens per block t")
    parser.add_argument("--sink-tokens", type=int_at_least(0), default=0, help="sink tokens (default 0)")


def add_semantics_arguments(parser: argparse.ArgumentParser, semantics_class: type | None = None) -> None:
    """One flag per option a ``Semantics`` class declares (``reference.semantics.options``; default
    the reference's): a count takes an integer at least its minimum, an enum one of its values, a flag
    ``--NAME``/``--no-NAME``. An option not given keeps its default; :func:`semantics_from_args` builds
    the semantics, its own checks (what an option needs) raising ``ConfigError``: one line, exit 2."""
    from swafloor.reference.semantics import options

    group = parser.add_argument_group("semantics (the reference's Semantics options; default: the spec)")
    for o in options(semantics_class):
        first = o.summary
        dest = f"semantics_{o.name}"
        if o.is_flag:
            group.add_argument(o.cli_flag, dest=dest, action=argparse.BooleanOptionalAction, default=None,
                               help=f"{first} (default: {'on' if o.default else 'off'})".replace("%", "%%"))
        elif o.values is not None:
            group.add_argument(o.cli_flag, dest=dest, choices=o.values, default=None,
                               help=f"{first} (default: {o.serialised(o.default)})".replace("%", "%%"))
        else:
            group.add_argument(o.cli_flag, dest=dest, type=int_at_least(o.minimum), default=None, metavar="N",
                               help=f"{first} (default: {o.default})".replace("%", "%%"))


def semantics_from_args(args: argparse.Namespace, semantics_class: type | None = None) -> Any:
    """The ``Semantics`` the flags :func:`add_semantics_arguments` added name (the defaults where none is given)."""
    from swafloor.reference.semantics import Semantics, options

    given = {o.name: getattr(args, f"semantics_{o.name}") for o in options(semantics_class)}
    return (semantics_class or Semantics)(**{name: value for name, value in given.items() if value is not None})


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def format_duration(seconds: float) -> str:
    """``seconds`` as a rough, readable duration: "40 s", "12 min", "3.5 h", "2.1 days", "4.2 years"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds < 730 * 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / (365 * 86400):,.1f} years"
