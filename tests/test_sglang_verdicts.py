"""The SGLang matrix names each divergence class a cell met by its known verdict (issue 33): each entry
of ``fuzz/engines/sglang/verdicts.py`` is shown by regression traces that diverge as its class, on its
backend, inside its release range, and match on the pinned release; a class outside every range stays
unnamed (a candidate). No SGLang is needed: the traces' replays are tests/test_sglang_releases.py's."""

from __future__ import annotations

import json
from pathlib import Path

from swafloor.fuzz import matrix
from swafloor.fuzz.engines.sglang.verdicts import KNOWN, classify

from .trace_class import class_of

REGRESSIONS = Path(__file__).parent / "regressions"


def test_each_known_class_is_shown_by_its_traces():
    for known in KNOWN:
        for class_key, trace in known.traces.items():
            data = json.loads((REGRESSIONS / trace).read_text(encoding="utf-8"))
            assert class_of(data) == class_key, (known.name, trace)
            assert data["expect"] == "divergence" and data["backend"] in known.backends, (known.name, trace)
            assert known.applies(data["found"]["release"], data["backend"]), (known.name, trace)
            # a trace saved under its release's profile (semantics the pinned release lacks, found.under_profile)
            # diverges there by those options
            assert data["found"]["on_pinned"] == "match" or data["found"].get("under_profile") is True, (known.name, trace)


def test_a_cell_names_the_known_classes_it_met():
    margin = "chunk-evict-page-margin (bug, fixed in 0.5.14)"
    assert classify("0.5.13.post1", "sglang", "tables@resize") == [margin]
    assert classify("0.5.13.post1", "dataplane:sglang", "outcome@schedule@resize") == [margin]
    assert classify("0.5.14", "sglang", "tables@resize") == []  # the release without it: a candidate
    assert classify("0.5.13.post1", "sglang-radix", "tables@resize") == []  # another backend
    assert classify("0.5.13.post1", "sglang-radix", "mapping@close") == [
        "partial-page-mapping (bug, sgl-project/sglang#27779)"]
    assert classify("0.5.15.post1", "sglang-radix", "liveness@resize") == [
        "radix-cut-page-margin (bug, sgl-project/sglang#29860)"]
    assert classify("0.5.16", "sglang-radix", "liveness@resize") == []
    assert matrix.engine_named("sglang").classify.endswith("verdicts:classify")
