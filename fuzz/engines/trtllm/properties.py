"""Hypothesis beyond the grid: the same comparisons on larger, random inputs (fixed seed)."""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, seed as hseed, settings
from hypothesis import strategies as st

from swafloor.reference import AttentionLayer, Config, SsmLayer, build_layout

from ...stream import source_blind
from .signals import Disagreement

__all__ = ["run_properties"]

_t = st.integers(1, 64)


@st.composite
def _stale_case(draw):
    t = draw(_t)
    window = draw(st.one_of(st.none(), st.integers(1, 600)))
    sinks = 0 if window is None else draw(st.integers(0, 200))
    return t, window, sinks, draw(st.integers(0, 6000))


@st.composite
def _scratch_case(draw):
    t = draw(_t)
    window = draw(st.integers(1, 600))
    h = draw(st.integers(0, 3000))
    return t, window, draw(st.integers(0, 100)), h, h + draw(st.integers(0, 3000)), draw(st.integers(0, 400))


@st.composite
def configs(draw):
    t = draw(st.integers(1, 64))
    layer = st.one_of(
        st.just(AttentionLayer()),
        st.just(SsmLayer()),
        st.builds(lambda w, s: AttentionLayer(window=w, sink_tokens=s), st.integers(1, 300), st.integers(0, 70)),
    )
    layers = draw(st.lists(layer, min_size=1, max_size=5).filter(lambda ls: any(isinstance(x, AttentionLayer) for x in ls)))
    base = Config(tokens_per_block=t, layers=layers)
    count = len(build_layout(base).life_cycles)
    labels = draw(st.lists(st.integers(0, count - 1), min_size=count, max_size=count))
    order: dict[int, int] = {}
    groups = tuple(order.setdefault(x, len(order)) for x in labels)
    return Config(tokens_per_block=t, layers=layers, pool_groups=groups)


@st.composite
def _batch_case(draw):
    config = draw(configs())
    t = config.tokens_per_block
    sys_len = draw(st.one_of(st.just(0), st.integers(t, 40 * t)))
    floor = (sys_len // t) * t if sys_len else 0
    requests = []
    for _ in range(draw(st.integers(1, 3))):
        h = floor + draw(st.integers(0, 2000))
        requests.append((h + draw(st.integers(0, 600)), h))
    rewind = draw(st.one_of(st.none(), st.integers(0, 300)))
    return config, requests, sys_len, rewind


def run_properties(checker: Any, examples: int, seed: int, tick: Callable[[str, int, int], None]) -> None:
    """Run each comparison on ``examples`` random inputs. A mismatch, or an exception raised by
    upstream code, is recorded by the checker with its whole input and ends that property (by our own
    :class:`~.signals.Disagreement`, never an ``AssertionError``, so an assert inside upstream code or a
    stand-in cannot pass for one of ours); an error of ours is recorded as *could not run*."""

    def run(name: str, strategy: Any, body: Callable[[Any], bool]) -> None:
        done = [0]

        @hseed(seed)
        @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def prop(case: Any) -> None:
            done[0] += 1
            tick(f"{name} (hypothesis)", done[0], examples)
            if not checker.guard(name, lambda: {"case": repr(case)}, body, case):
                raise Disagreement(name)

        try:
            with source_blind():
                prop()
        except Disagreement:
            pass  # recorded by the checker, with the whole input

    run("stale ranges", _stale_case(), lambda c: checker.stale(*c))
    run("scratch ranges", _scratch_case(), lambda c: checker.scratch(*c))

    def structure(config: Config) -> bool:
        ok, registry, tl = checker.registry(config)
        return ok and checker.min_slots(config, registry, tl)

    run("life cycles and minimum slots", configs(), structure)

    def batches(case: Any) -> bool:
        config, requests, sys_len, rewind = case
        ok, registry, tl = checker.registry(config)
        return ok and checker.batch_slots(config, registry, tl, requests, sys_len, rewind) and (
            sys_len > 0 or checker.min_slots_with_batch(config, registry, tl, requests, sys_len, rewind)
        )

    run("batch slot counts", _batch_case(), batches)

    def accounting(case: Any) -> bool:
        config, extra = case
        ok, registry, tl = checker.registry(config)
        steps = min(160, 3 * max((lc[1] or 0) + lc[2] * config.tokens_per_block for lc in tl.life_cycles) + 2 * config.tokens_per_block)
        return ok and checker.accounting(config, registry, tl, extra, steps)

    run("slot accounting through decode", st.tuples(configs(), st.integers(0, 2)), accounting)
