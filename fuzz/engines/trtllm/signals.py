"""The check's own signal that a comparison disagreed: apart from :mod:`.compare` and
:mod:`.properties`, which both raise or catch it (so neither imports the other for it)."""

from __future__ import annotations

__all__ = ["Disagreement"]


class Disagreement(Exception):
    """Our own signal that a comparison disagreed (recorded already); ends a Hypothesis property.
    Never an ``AssertionError``: an assert inside upstream code must not pass for one of ours."""
