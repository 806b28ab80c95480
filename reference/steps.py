"""The no-change cache of :class:`~.core.CoreManager` (a mixin): a step that changes no block is
recognised from a per-request box of capacities and histories, without planning. An optimisation
only: with :meth:`UnchangedSteps.skips_unchanged_steps` False every step is planned."""

from __future__ import annotations

from . import lifecycle
from .values import NEVER, first_change

__all__ = ["UnchangedSteps"]


class UnchangedSteps:
    """The box ``[capacity_from, capacity_below) x [history_from, history_below)`` each request record
    keeps: the blocks every life cycle requires are the same for all capacities and histories in it."""

    def skips_unchanged_steps(self) -> bool:
        """Hook: whether the box may skip planning. True when :meth:`required_ranges` depends on the
        capacity only through each block size's allocated count and on the history only through
        :meth:`stale_range` (a layer or seeded bug that changes that says False)."""
        return True

    def moving_windows(self) -> list[int]:
        """Hook: the life cycles whose stale range may move as the history grows (every windowed one;
        a layer that never frees as a window slides says fewer)."""
        return self._windows

    def _unchanged(self, req, history: int, capacity: int) -> bool:
        """Whether moving an active ``req`` to ``(history, capacity)`` changes none of its blocks, judged
        from the box alone (False when unsure: the caller then plans)."""
        return (
            req.history_from <= history < req.history_below
            and req.capacity_from <= capacity < req.capacity_below
            and self.skips_unchanged_steps()
        )

    def _refresh(self, req) -> None:
        """Renew the box after the request's blocks changed. Both dependencies are monotone: the
        required blocks stay the same from the current capacity up to the first capacity that
        allocates one more block, and from the current history up to the first history at which some
        window's stale range moves on. Each bound is found by searching the reference's own functions
        (no formula restated), in O(log distance) evaluations, and only when the request has left the box."""
        sizes = self._sizes
        c = req.capacity
        if not req.capacity_from <= c < req.capacity_below:
            guess = req.capacity_below - req.capacity_from

            def spans(x: int) -> tuple[int, ...]:  # the blocks capacity x spans, in each block size
                return tuple(lifecycle.allocated_blocks(x, t) for t in sizes)

            req.capacity_from = c
            req.capacity_below = first_change(spans, c, spans(c), guess=guess)
        h = req.released_to
        if not req.history_from <= h < req.history_below:
            guess = req.history_below - req.history_from if req.history_below != NEVER else 0
            nearest: int | float = NEVER
            for lc_index in self.moving_windows():
                nearest = first_change(lambda x: self.stale_range(lc_index, x), h, self.stale_range(lc_index, h),
                                       nearest, guess)
            req.history_from, req.history_below = h, nearest
