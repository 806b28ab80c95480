"""Small helpers shared by subcommands: positive-int argument types and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = f"int>={minimum}"
    return parse


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def add_window_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments that describe one sliding-window life cycle."""
    parser.add_argument("--window", type=int_at_least(1), required=True, help="window W in tokens (sinks excluded)")
    parser.add_argument("--tokens-per-block", type=int_at_least(1), required=True, help="tokens per block t")
    parser.add_argument("--sink-tokens", type=int_at_least(0), default=0, help="sink tokens (default 0)")


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
