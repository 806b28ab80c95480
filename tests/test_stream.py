"""A fixed seed draws the same examples whatever literals the project's source holds (fuzz/stream.py)."""

from __future__ import annotations

import importlib.util
import sys

from hypothesis import Phase, given, seed, settings, strategies as st

from swafloor.fuzz.stream import source_blind

MARKER = 987_654_321_123  # the literal a planted local module carries


def _draws(blind: bool) -> list[int]:
    drawn: list[int] = []

    @seed(1234)
    @settings(max_examples=400, database=None, phases=[Phase.generate], deadline=None)
    @given(st.integers())
    def draw(value: int) -> None:
        drawn.append(value)

    if blind:
        with source_blind():
            draw()
    else:
        draw()
    return drawn


def _plant_module(tmp_path, name: str) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text("".join(f"C{i} = {MARKER + i}\n" for i in range(40)))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module


def test_a_new_literal_in_local_source_leaves_the_blind_stream_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Hypothesis calls a module local when it lies under the working directory
    before = _draws(blind=True)
    _plant_module(tmp_path, "swafloor_stream_plant")
    try:
        after = _draws(blind=True)
        seeing = _draws(blind=False)
    finally:
        del sys.modules["swafloor_stream_plant"]
    assert after == before
    # The plant is visible to Hypothesis when not blind: the test above could fail.
    assert any(MARKER <= v < MARKER + 40 for v in seeing), "Hypothesis no longer draws local constants"
    assert not any(MARKER <= v < MARKER + 40 for v in after)


def test_the_hook_is_restored_on_exit():
    from hypothesis.internal.conjecture import providers

    hook = providers._get_local_constants
    with source_blind():
        assert providers._get_local_constants is not hook
    assert providers._get_local_constants is hook
