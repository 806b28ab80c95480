"""A first resume's prefix-cache hit, compared one-sided: the lost-hit policy.

A backend that declares lost-hit rules (``Capabilities.lost_hit_rules``) may take a valid hit shorter
than the longest one (a *lost hit*: the engine recomputes what it could have reused), provided one of
its declared rules yields exactly that hit. What each side shows for it is declared in
:mod:`swafloor.fuzz.protocol`: the backend's :class:`~swafloor.fuzz.protocol.PrefixCacheHits`
(``hit_tokens``), the side compared against's :class:`~swafloor.fuzz.protocol.HitModel` (``longest_hit``,
``hit_is_valid``, ``rule_hit`` and a ``resume`` that takes a given hit). :class:`LostHitPolicy` holds
the rules and judges a taken hit against the model's: longer, shorter and not valid, or shorter and
valid but yielded by no declared rule is a divergence (field ``hit``); shorter, valid and yielded by a
declared rule is a :class:`LostHit`, and the side compared against then takes that same hit
(:class:`TakingHit`). :class:`~swafloor.fuzz.lockstep.Lockstep` runs the steps; this module decides.
"""

from __future__ import annotations

from typing import Any, Hashable, Mapping, NamedTuple

import attrs

from swafloor.reference import SwafloorError

from .compare import Divergence
from .protocol import Capabilities, HitModel
from .trace import Step

__all__ = ["LostHit", "ExpectedHit", "LostHitPolicy", "TakingHit", "reference_hit_taken"]


class LostHit(NamedTuple):
    """A lost hit: at step ``step_index`` request ``request`` took ``taken`` tokens where the longest
    valid hit was ``longest``; ``rule`` is the declared lost-hit rule that yields it."""

    step_index: int
    request: str
    longest: int
    taken: int
    rule: str


@attrs.frozen
class ExpectedHit:
    """What the model says of a first resume before it runs: its longest valid hit, and the hit each
    declared lost-hit rule yields (rule name -> tokens, None where the rule yields none)."""

    longest: int
    by_rule: Mapping[str, int | None]


@attrs.frozen
class LostHitPolicy:
    """The declared lost-hit rules of a backend (``Capabilities.lost_hit_rules``) and how a first
    resume's taken hit is judged against the model's."""

    rules: tuple[str, ...] = attrs.field(converter=tuple)

    @classmethod
    def of(cls, caps: Capabilities) -> LostHitPolicy | None:
        """The policy ``caps`` declares; None when it declares no lost-hit rule (hits compared exactly)."""
        return cls(caps.lost_hit_rules) if caps.lost_hits else None

    def expect(self, model: HitModel, request_id: Hashable) -> ExpectedHit | None:
        """The model's expectation for the request's next resume; None where it is no first resume
        that looks the cache up (or the step is misuse: its own error is then compared as usual)."""
        try:
            longest = model.longest_hit(request_id)
            if longest is None:
                return None
            return ExpectedHit(longest, {r: model.rule_hit(request_id, r) for r in self.rules})
        except SwafloorError:  # not suspended, unknown...: the step's own error, compared as usual
            return None

    def judge(self, index: int, step: Step, model: HitModel, expected: ExpectedHit,
              taken: int) -> tuple[Divergence | None, LostHit | None]:
        """A taken hit against the expectation: (divergence or None, the lost hit or None). Equal to the
        longest: neither."""
        longest = expected.longest
        if taken == longest:
            return None, None
        valid = taken < longest and model.hit_is_valid(step.request, taken)
        if not valid:
            why = ("a hit longer than the longest valid one: the backend reuses what no valid hit may "
                   "(a correctness bug)" if taken > longest else
                   "a shorter hit that is not valid either (a block it needs is not cached, or it is off "
                   "the alignment)")
            return Divergence(index, step, "hit", longest, taken, "at-most", why), None
        rule = next((r for r, hit in expected.by_rule.items() if hit == taken), None)
        if rule is None:
            yields = ", ".join(f"{r} yields {hit}" for r, hit in expected.by_rule.items())
            return Divergence(index, step, "hit", longest, taken, "at-most",
                              f"a shorter valid hit that no declared lost-hit rule explains ({yields}): "
                              "a lost hit of no modelled kind"), None
        return None, LostHit(index, str(step.request), longest, taken, rule)


class TakingHit:
    """A model side whose ``resume`` takes a given hit (the backend's lost hit), for :func:`~swafloor.fuzz.compare.run_step`."""

    def __init__(self, side: HitModel, hit_tokens: int):
        self.side, self.hit_tokens = side, hit_tokens

    def resume(self, request_id: str):
        return self.side.resume(request_id, hit_tokens=self.hit_tokens)


def reference_hit_taken(reference: Any, request_id: str) -> bool:
    """Whether the reference side's first resume of ``request_id`` took a block as a cache hit (read
    from its manager's ``hit_blocks`` count, else from a slot it shares in its snapshot)."""
    manager = getattr(reference, "manager", None)
    count = getattr(manager, "hit_blocks", None)
    if callable(count):
        return count(request_id) > 0
    sharing = getattr(reference.observe(), "sharing", ())
    return any(request_id in holders for _, _, holders in sharing)
