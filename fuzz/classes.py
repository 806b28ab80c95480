"""A campaign that reports every divergence class it meets, not only the first.

A campaign stops at its first divergence; whatever else the backend gets wrong on later examples is
then never seen (one known semantics difference turns a release red and hides the rest).
:func:`run_classes` runs the same fixed-seed campaign again after each divergence, with the classes it
already has marked known: an example that meets a known class ends there (counted per class, in
``masked``) and the campaign goes on, so the next run finds the next class, shrinks it and saves its
trace. It stops when a run finds no new class (the last run's counts are the campaign's) or at
``limit`` classes (then ``limited``: more may remain, and the last run is the last class's).

A class is the part that differs and the operation it differs at (:attr:`Divergence.class_key`), so
two bugs that show in the same part at the same kind of operation are one class here: the first one's
trace stands for both, and a fix that removes it lets a rerun find the other.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from .runner import CampaignResult, format_report, run_campaign

__all__ = ["ClassesResult", "run_classes", "format_classes"]


@attrs.frozen
class ClassesResult:
    """The campaigns of :func:`run_classes`: one per class found (each with its divergence, shrunk
    trace and replay command), then the last, which found none (or hit ``limit``)."""

    found: tuple[CampaignResult, ...]
    last: CampaignResult
    limit: int

    @property
    def limited(self) -> bool:
        """The limit ended the search: the last run found a class too, so more may remain."""
        return self.last.divergence is not None

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(r.divergence.class_key for r in self.found)

    @property
    def result(self) -> str:
        return "divergence" if self.found else self.last.result

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.found) + (0.0 if self.limited else self.last.seconds)

    def class_rows(self) -> list[dict[str, Any]]:
        rows = []
        for r in self.found:
            d = r.divergence
            rows.append({
                "class": d.class_key, "field": d.field, "step_index": d.step_index,
                "first_failure_example": r.first_failure_example,
                "masked_after": self.last.masked.get(d.class_key, 0),
                "trace_file": None if r.trace_file is None else str(r.trace_file), "replay": r.replay,
            })
        return rows

    def to_dict(self) -> dict[str, Any]:
        """The first class's campaign in the layout of one campaign's JSON (so readers of ``result``,
        ``divergence`` and ``trace`` need nothing new), plus every class and the limit."""
        head = (self.found[0] if self.found else self.last).to_dict()
        head["result"] = self.result
        head["classes"] = self.class_rows()
        head["class_limit"] = self.limit
        head["limited"] = self.limited
        head["seconds_all_classes"] = round(self.seconds, 3)
        head["masked"] = dict(self.last.masked)
        return head


def run_classes(backend: Any, against: Any = "reference", *, limit: int = 4,
                on_class: Callable[[CampaignResult], None] | None = None, **campaign: Any) -> ClassesResult:
    """Run :func:`~swafloor.fuzz.runner.run_campaign` (``campaign``: its keyword arguments) until it
    finds no new divergence class, or ``limit`` classes. ``on_class`` is told each class found."""
    if limit < 1:
        from .runner import CampaignError

        raise CampaignError(f"limit={limit!r}: must be at least 1")
    found: list[CampaignResult] = []
    known: set[str] = set()
    while True:
        result = run_campaign(backend, against, known_classes=frozenset(known), **campaign)
        if result.divergence is None:
            return ClassesResult(found=tuple(found), last=result, limit=limit)
        key = result.divergence.class_key
        if key in known:  # pragma: no cover - the machine ends such examples before they fail
            raise AssertionError(f"class {key} reported twice")
        found.append(result)
        known.add(key)
        if on_class is not None:
            on_class(result)
        if len(found) == limit:  # the last run found a class too: more may remain
            return ClassesResult(found=tuple(found), last=result, limit=limit)


def format_classes(result: ClassesResult) -> str:
    """The human report: each class's report (its divergence, whole input and replay), then a summary."""
    parts = [format_report(r) for r in result.found]
    if not result.found:
        parts.append(format_report(result.last))
    summary = [f"classes: {len(result.found)}" + (f" (the limit, {result.limit}: more may remain)" if result.limited else
                                                     " (a last run found no other)")]
    for row in result.class_rows():
        summary.append(f"  {row['class']}: first at example {row['first_failure_example']}, step {row['step_index']} "
                       f"({row['field']}); {row['masked_after']} later examples ended in it"
                       + (f"; trace {row['trace_file']}" if row["trace_file"] else ""))
    return "\n\n".join(parts) + "\n\n" + "\n".join(summary)
