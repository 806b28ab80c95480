"""The refusal layer: a refused resize keeps the blocks that left the window (``refused_keeps_stale``).

Under ``free_stale = at-allocate`` a resize first frees what is stale at the current history, and that
release stands when the allocation is then refused. With ``refused_keeps_stale`` (LMDeploy's window
block manager, which drops blocks only inside an allocation that succeeds) nothing is freed before the
gate: the resize's plan releases everything stale at its own release point, the blocks stale since
the last release included, its gate counts them all as free, and a refused resize leaves every block
held. For one request the gate sees the same slots either way (what it holds after the step against
the pool); between requests a refused one keeps blocks another could have taken
(theorem ``refused-keeps-stale-lone-request``).
"""

from __future__ import annotations

from .core import RequestRecord
from .release import ReleasePolicy

__all__ = ["RefusalPolicy"]


class RefusalPolicy(ReleasePolicy):
    """The release policy with a refused resize freeing nothing (the option off: the policy's behaviour)."""

    def catch_up(self, record: RequestRecord) -> None:
        if not self.semantics.refused_keeps_stale:
            super().catch_up(record)
