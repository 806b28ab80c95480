"""Every reference formula against the token-level brute force, over exhaustive small ranges."""

from __future__ import annotations

import pytest

from swafloor.reference import (
    allocated_blocks,
    blocks_touched,
    cdiv,
    fdiv,
    fmod,
    full_attention_floor,
    legacy_floor,
    live_block_indices,
    live_blocks,
    scratch_range,
    sink_blocks_for,
    stale_range,
    step_floor,
    swa_floor,
    window_blocks,
    window_span_blocks,
    worst_case_history,
)

from . import brute

TS = range(1, 17)
WS = range(1, 65)


def horizon(t: int, window: int, sink_tokens: int) -> int:
    """'A few windows past the sinks': every phase of the window against the blocks occurs."""
    return sink_tokens + 3 * window + 2 * t


def test_kernel_matches_python_on_ints():
    for a in range(-40, 41):
        for b in range(1, 12):
            assert fdiv(a, b) == a // b
            assert cdiv(a, b) == -((-a) // b)
            assert fmod(a, b) == a % b


@pytest.mark.parametrize("t", TS)
def test_window_span_and_blocks_touched(t):
    for length in range(1, 3 * 16 + 2):
        worst = max(brute.touched(first, length, t) for first in range(0, 2 * t))
        assert window_span_blocks(length, t) == worst, (t, length)
        assert blocks_touched(t - 1, length, t) == worst, (t, length)
        for first in range(0, 2 * t):
            assert blocks_touched(first, length, t) == brute.touched(first, length, t)


@pytest.mark.parametrize("t", TS)
def test_sink_blocks(t):
    for sinks in range(0, 41):
        assert sink_blocks_for(sinks, t) == len(brute.sink_block_set(sinks, t))


@pytest.mark.parametrize("t", TS)
def test_stale_and_live_blocks_decode_and_steps(t):
    """Stale range, live blocks and indices at every (h, c = h + n), n <= 8, all W <= 64, sinks
    <= 40 (sinks sampled on their block phases: 0, 1, t-1, t, t+1, 2t, 40), h over a few windows."""
    sink_choices = sorted({s for s in (0, 1, t - 1, t, t + 1, 2 * t, 40) if 0 <= s <= 40})
    for window in WS:
        for sinks in sink_choices:
            s = sink_blocks_for(sinks, t)
            for h in range(horizon(t, window, sinks)):
                start, end = stale_range(h, t, window, s)
                stale = set(range(start, end))
                assert stale == brute.stale_set(h, t, window, sinks, upto=h // t + 2), (t, window, sinks, h)
                for n in (0, 1, 2, 8):
                    c = h + n
                    expected = brute.live_set(h, c, t, window, sinks)
                    assert live_blocks(h, c, t, window, s) == len(expected), (t, window, sinks, h, n)
                    assert set(live_block_indices(h, c, t, window, s)) == expected


@pytest.mark.parametrize("t", TS)
def test_floors_equal_brute_force_worst_case(t):
    """The floor (n = 1) and the n-token need are the brute-force maxima over histories, and the
    worst-case history attains them; all W <= 64, all sinks <= 40, n <= 8."""
    for window in WS:
        for sinks in range(0, 41):
            s = sink_blocks_for(sinks, t)
            h_star = worst_case_history(t, window, s)
            for n in range(1, 9):
                need = len(brute.live_set(h_star, h_star + n, t, window, sinks))
                assert step_floor(t, window, s, n) == need, (t, window, sinks, n)
            assert swa_floor(t, window, s) == s + window_blocks(t, window)


@pytest.mark.parametrize("t", TS)
def test_no_history_exceeds_the_floor(t):
    """Brute-force maximum over all h in a few windows past the sinks, n <= 8 (sinks on their phases)."""
    for window in WS:
        for sinks in sorted({0, 1, t, t + 1}):
            s = sink_blocks_for(sinks, t)
            for n in (1, 2, 5, 8):
                worst, _ = brute.worst_step_need(t, window, sinks, n, horizon(t, window, sinks))
                assert worst == step_floor(t, window, s, n), (t, window, sinks, n)


def test_full_attention_and_allocated():
    for t in TS:
        for c in range(0, 100):
            assert allocated_blocks(c, t) == len(brute.allocated(c, t))
            assert live_blocks(max(0, c - 1), c, t, None, 0) == len(brute.allocated(c, t))
    assert full_attention_floor(0) == 1 and full_attention_floor(6) == 6 and legacy_floor() == 1


@pytest.mark.parametrize("t", [1, 2, 3, 4, 8, 16, 32])
def test_scratch_range(t):
    """Scratch blocks: newly allocated by the step, and stale at the rewound history."""
    for window in (1, 2, 5, 8, 33, 64):
        for sinks in (0, 1, t + 1):
            s = sink_blocks_for(sinks, t)
            for h in range(0, 3 * t + window, max(1, t // 2)):
                for n in (1, 7, 40, 200):
                    c = h + n
                    for rewind in (0, 1, t, 64):
                        lo, hi = scratch_range(h, c, t, window, s, rewind)
                        hr = max(0, c - rewind)
                        newly = {b for b in brute.allocated(c, t) if b * t >= h}
                        expected = newly & brute.stale_set(hr, t, window, sinks, upto=c // t + 2)
                        assert set(range(lo, hi)) == expected, (t, window, sinks, h, n, rewind)


def test_upstream_scratch_figures():
    # t = 32, W = 32, a 256-token prompt at h = 0 (upstream_facts §1.2)
    assert scratch_range(0, 256, 32, 32, 0, 0) == (0, 7)
    assert scratch_range(0, 256, 32, 32, 0, 64) == (0, 5)
