"""Retired requests: the holes of a one-sided comparison, and the verdict they give a campaign.

A backend whose outcome is compared ``at-least`` may serve a request where the reference runs out
of slots (one compared ``retires`` may also run out where the reference serves); lockstep then
retires that request from every later comparison. A retirement is a hole in
what the campaign saw, so a campaign of such a backend that retires more than
:data:`MAX_RETIRED_SHARE` of its requests fails (``too-many-retired``), whatever else it saw.
"""

from __future__ import annotations

__all__ = ["MAX_RETIRED_SHARE", "RetiredVerdict", "too_many_retired", "verdict"]

#: The most requests a campaign of a backend with a one-sided (``at-least``) outcome may retire.
MAX_RETIRED_SHARE = 0.05


def too_many_retired(limited: bool, retired: int, requests: int) -> bool:
    """More than MAX_RETIRED_SHARE of the requests retired, for a one-sided (or retiring) outcome: a failure."""
    return limited and requests > 0 and retired / requests > MAX_RETIRED_SHARE


def verdict(diverged: bool, too_many: bool) -> str:
    """A campaign's result: a divergence first, then too many requests retired, else a pass."""
    return "divergence" if diverged else "too-many-retired" if too_many else "pass"


class RetiredVerdict:
    """What a campaign result with ``retire_limited``, ``retired``, ``requests`` and ``diverged``
    says: its ``too_many_retired`` and its ``result``."""

    @property
    def too_many_retired(self) -> bool:
        return too_many_retired(self.retire_limited, self.retired, self.requests)  # type: ignore[attr-defined]

    @property
    def result(self) -> str:
        return verdict(self.diverged, self.too_many_retired)  # type: ignore[attr-defined]
