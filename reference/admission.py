"""Admission: what a scheduler must charge a waiting request, and the run of a lone request.

A request has ``P >= 1`` prompt tokens and ``O >= 1`` output tokens. It is prefilled in chunks of at
most ``C >= 1`` tokens, then decoded one token a step, each decode step also holding ``k >= 0`` slots
for draft tokens (speculative decoding's lookahead). At history ``h`` its step holds the capacity
``h + step_tokens(h)`` and commits ``advance(h)`` tokens; it runs until all ``P + O`` tokens' KV is
computed (engines stop one token earlier: the last sampled token is never fed back; counting it
keeps every bound safe).

The rule (issue 32): a waiting request needs, per sliding-window life cycle, the floor of its
largest step, ``step_floor`` at ``n = max(min(C, P), 1 + k)``; never ``cdiv(P, t)``: what a window
holds does not grow with the prompt. Full attention needs ``cdiv(P + k, t)`` to start and
``cdiv(P + O + k, t)`` to finish. Written on the arithmetic kernel, so the proofs evaluate these on Z3
terms; the engines' own gates are in :mod:`.peers`.
"""

from __future__ import annotations

from typing import Any

from .arith import cdiv, imax, imin, ite
from .floors import step_floor

__all__ = [
    "step_tokens",
    "advance",
    "largest_step",
    "swa_admission_blocks",
    "full_admission_blocks",
    "full_run_blocks",
    "run_length",
    "resume_admits",
    "lone_run",
]


def step_tokens(h: Any, prompt: Any, chunk: Any, lookahead: Any) -> Any:
    """The tokens past history ``h`` the step at ``h`` holds room for: the next prefill chunk,
    ``min(C, P - h)``, while the prompt lasts; then one decoded token plus ``k`` draft slots."""
    return ite(h < prompt, imin(chunk, prompt - h), 1 + lookahead)


def advance(h: Any, prompt: Any, chunk: Any) -> Any:
    """The tokens the step at ``h`` commits: its prefill chunk, or the one decoded token (drafts are
    not committed here: a rejected draft commits nothing, an accepted one is the next step's)."""
    return ite(h < prompt, imin(chunk, prompt - h), 1)


def largest_step(prompt: Any, chunk: Any, lookahead: Any) -> Any:
    """The most tokens any step of the request holds room for: ``max(min(C, P), 1 + k)``."""
    return imax(imin(chunk, prompt), 1 + lookahead)


def swa_admission_blocks(t: Any, window: Any, sink_blocks: Any, prompt: Any, chunk: Any, lookahead: Any) -> Any:
    """What admission must charge a request for one SWA life cycle: the floor of its largest step,
    ``S + ceil((W + n - 2) / t) + 1`` at ``n = largest_step``. Enough for every step of the run."""
    return step_floor(t, window, sink_blocks, largest_step(prompt, chunk, lookahead))


def full_admission_blocks(t: Any, prompt: Any, lookahead: Any) -> Any:
    """What admission charges a request for full attention: the prompt and one step's draft slots,
    ``cdiv(P + k, t)`` (its later growth is charged step by step)."""
    return cdiv(prompt + lookahead, t)


def full_run_blocks(t: Any, prompt: Any, output: Any, lookahead: Any) -> Any:
    """The most full-attention blocks the whole run holds: ``cdiv(P + O + k, t)``, at its last step."""
    return cdiv(prompt + output + lookahead, t)


def run_length(prompt: Any, output: Any) -> Any:
    """The history at which the run is done: ``P + O``."""
    return prompt + output


def resume_admits(total: Any, used: Any, held: Any, needed: Any) -> Any:
    """The rule's resume gate for one pool group: a suspended request that still holds ``held`` of the
    ``needed`` slots its resume asks for (a suspend that keeps its slots, TensorRT-LLM V2's with GPU
    memory only) is admitted when the free slots, ``total - used``, cover the rest, ``needed - held``.
    What it holds is never charged again (the reference manager's own resume of a kept request)."""
    return needed - held <= total - used


def lone_run(call: Any, rid: Any, prompt: int, output: int, chunk: int, lookahead: int) -> bool:
    """Run one request the scheduler's way through ``call(op, rid, *args)`` (a manager's operation by
    name): create, resume, then per step a resize to the step's capacity (:func:`step_tokens`) and a
    commit of what it computed (:func:`advance`), until all ``P + O`` tokens are computed; then close.
    True when every resume and resize succeeded."""
    call("create", rid)
    if not call("resume", rid):
        return False
    h = 0
    while h < run_length(prompt, output):
        if not call("resize", rid, h + step_tokens(h, prompt, chunk, lookahead), h):
            return False
        step = advance(h, prompt, chunk)
        call("commit", rid, step)
        h += step
    call("close", rid)
    return True
