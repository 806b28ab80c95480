"""Pictures of the theorem catalogue's refutations: for each refuted claim, the failing step of its
smallest counterexample. Claims about one step of one request are drawn as that step's blocks
(:func:`swafloor.svg.block_svg`); any other refutation as its replay on the reference manager, one
call per row, the failing call in red.
"""

from __future__ import annotations

from typing import Callable, Mapping

from .. import svg
from ..picture import count_noun, picture
from swafloor.reference import floors

__all__ = ["refutation_svg", "STEP_PICTURES"]


def _legacy(c: Mapping[str, int]) -> tuple[dict, str]:
    pic = picture(c["W"], c["t"], c["S"] * c["t"], c["h"])
    pool = count_noun(floors.legacy_floor(), "slot")
    return pic, f"the pre-fix pool has {pool}; this decode step holds {pic['live_blocks']}"


def _multi_token(c: Mapping[str, int]) -> tuple[dict, str]:
    pic = picture(c["W"], c["t"], c["S"] * c["t"], c["h"], step_tokens=c["n"])
    floor = floors.swa_floor(c["t"], c["W"], c["S"])
    return pic, (f"a pool at the decode floor has {count_noun(floor, 'slot')}; "
                 f"this {c['n']}-token step holds {pic['live_blocks']}")


def _in_flight(c: Mapping[str, int]) -> tuple[dict, str]:
    pic = picture(c["W"], c["t"], c["S"] * c["t"], c["h"], in_flight=1)
    floor = floors.swa_floor(c["t"], c["W"], c["S"])
    return pic, f"the synchronous floor is {floor}; with one token in flight this step holds {pic['live_blocks']}"


def _same_call(c: Mapping[str, int]) -> tuple[dict, str]:
    pic = picture(c["W"], c["t"], c["S"] * c["t"], c["h"] + 1, hold=True)
    floor = floors.swa_floor(c["t"], c["W"], c["S"])
    return pic, f"a pool at the floor has {count_noun(floor, 'slot')}; inside this call {pic['live_blocks']} are held"


def _resume_copy(c: Mapping[str, int]) -> tuple[dict, str]:
    pic = picture(c["W"], c["t"], c["S"] * c["t"], c["h"], first_resume=True)
    floor = floors.swa_floor(c["t"], c["W"], c["S"])
    return pic, (f"a pool at the floor has {count_noun(floor, 'slot')}; "
                 f"this first resume holds {pic['live_blocks']}")


#: Refutations drawn as one step's blocks: theorem name -> counterexample -> (picture, caption).
STEP_PICTURES: dict[str, Callable[[Mapping[str, int]], tuple[dict, str]]] = {
    "legacy-floor-insufficient": _legacy,
    "decode-floor-short-for-multi-token": _multi_token,
    "sync-floor-short-in-flight": _in_flight,
    "resume-partial-copy": _resume_copy,
    "same-call-release-transient": _same_call,
}


def refutation_svg(name: str, counterexample: Mapping[str, int], replay_trace: tuple[str, ...] | None) -> str:
    """The picture of one refutation's failing step."""
    if name in STEP_PICTURES:
        pic, caption = STEP_PICTURES[name](counterexample)
        return svg.block_svg(pic, caption=f"{name}: {caption}")
    cex = ", ".join(f"{k} = {v}" for k, v in counterexample.items())
    return svg.lines_svg(f"{name}: counterexample {cex}, replayed on the reference manager",
                         list(replay_trace or ("(no replay)",)))
