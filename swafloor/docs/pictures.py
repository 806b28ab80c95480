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


# ----------------------------------------------------------------------------- held blocks against history
#: The example the rule card draws: W = 128, t = 32, one sink block.
HISTORY_EXAMPLE = {"t": 32, "W": 128, "S": 1, "h_max": 288}


def history_census(t: int, window: int, sink_blocks: int, h_max: int) -> dict:
    """What one request decoding alone holds at each history ``0 .. h_max`` (``live_blocks(h, h + 1)``),
    with the floor, the first history that holds it, the worst-case history the theorems name, and
    how many of every ``t`` histories past the first hold the floor."""
    from swafloor.reference import first_floor_history, live_blocks, swa_floor, worst_case_history

    held = [live_blocks(h, h + 1, t, window, sink_blocks) for h in range(h_max + 1)]
    floor = swa_floor(t, window, sink_blocks)
    first = held.index(floor)
    period = [live_blocks(h, h + 1, t, window, sink_blocks) for h in range(first, first + t)]
    return {"held": held, "floor": floor, "first": first, "first_formula": first_floor_history(t, window, sink_blocks),
            "worst": worst_case_history(t, window, sink_blocks), "at_floor_per_period": period.count(floor),
            "t": t, "W": window, "S": sink_blocks}


def held_vs_history_svg() -> str:
    """Blocks one decoding request holds against its history, for :data:`HISTORY_EXAMPLE`, with the
    pre-fix pool of one slot and the floor as lines; the first history at the floor and the worst case
    the theorems name are marked."""
    from swafloor.reference import legacy_floor

    ex = HISTORY_EXAMPLE
    c = history_census(ex["t"], ex["W"], ex["S"], ex["h_max"])
    left, top, width, height = 60.0, 60.0, 720.0, 240.0
    top_blocks = c["floor"] + 1
    def x(h: float) -> float:
        return left + width * h / ex["h_max"]

    def y(b: float) -> float:
        return top + height * (1 - b / top_blocks)

    body = [svg._text(left, 24, f"Blocks held by one decoding request, W = {c['W']}, t = {c['t']}, S = {c['S']}", 15,
                      weight="bold"),
            svg._text(left, 44, f"floor S + ceil((W-1)/t) + 1 = {c['floor']}; the pre-fix pool: "
                      f"{legacy_floor()} slot", 13)]
    body.append(f"<path d='M{left:.1f},{top:.1f} L{left:.1f},{top + height:.1f} L{left + width:.1f},{top + height:.1f}' "
                "fill='none' stroke='#222222' stroke-width='1.2'/>")
    for b in range(0, top_blocks + 1):
        body.append(svg._text(left - 8, y(b) + 4, str(b), 11, "end"))
    for h in range(0, ex["h_max"] + 1, ex["t"]):
        body.append(svg._text(x(h), top + height + 16, str(h), 11, "middle"))
    body.append(svg._text(left + width / 2, top + height + 34, "history h (tokens computed)", 12, "middle"))
    body.append(svg._text(18, top + height / 2, "blocks", 12, "middle"))
    points = []
    for h, n in enumerate(c["held"]):
        points.append(f"{x(h):.1f},{y(n):.1f}")
        points.append(f"{x(h + 1):.1f},{y(n):.1f}")
    body.append(f"<polyline points='{' '.join(points)}' fill='none' stroke='{svg.COLOURS['*']}' stroke-width='2'/>")
    for level, colour, label in ((legacy_floor(), "#d7301f", f"pre-fix pool: {legacy_floor()} slot"),
                                 (c["floor"], "#31a354", f"floor: {c['floor']} slots")):
        body.append(f"<path d='M{left:.1f},{y(level):.1f} L{left + width:.1f},{y(level):.1f}' stroke='{colour}' "
                    "stroke-width='1.5' stroke-dasharray='6 4' fill='none'/>")
        body.append(svg._text(left + width + 6, y(level) + 4, label, 11, fill=colour))
    for h in (c["first"], c["worst"]):
        body.append(f"<circle cx='{x(h) + 0.5:.1f}' cy='{y(c['floor']):.1f}' r='4' fill='#08519c'/>")
    body.append(svg._text(x(c["first"]) - 4, y(c["floor"]) - 10, f"h = {c['first']}: first at the floor", 11, "end"))
    body.append(svg._text(x(c["worst"]) + 4, y(c["floor"]) - 10, f"h = {c['worst']}: the worst case decode-tight names",
                          11))
    body.append(svg._text(left, top + height + 56,
                          f"From h = {c['first']} on, {c['at_floor_per_period']} of every {c['t']} histories hold the "
                          f"floor: a pool one slot short fails at almost every step, not at a corner.", 12))
    return svg._document(left + width + 150, top + height + 72, body,
                         f"blocks held against history, W = {c['W']}, t = {c['t']}, S = {c['S']}")
