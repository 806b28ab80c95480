"""A campaign that reports every divergence class it meets (fuzz/classes.py; issue 33: nothing masked)."""

from __future__ import annotations

import json

import attrs
import pytest

from swafloor.fuzz.classes import format_classes, run_classes
from swafloor.fuzz.matrix import Cell
from swafloor.fuzz.replay import replay
from swafloor.fuzz.trace import load

MUTANT = "reference-mutant:sinks-released"  # releases sink blocks: several parts, at several operations


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    out = tmp_path_factory.mktemp("classes")
    return run_classes("oracle", MUTANT, limit=2, profile="ci", examples=100, shrink=False, out_dir=out)


def test_each_class_is_found_once_with_a_trace_that_replays_to_it(classes):
    assert classes.result == "divergence"
    assert len(classes.found) == 2 and classes.limited
    keys = classes.classes
    assert len(set(keys)) == 2, keys  # a class found twice would mean the mask failed
    for row in classes.class_rows():
        trace = load(row["trace_file"])
        # replayed alone (nothing masked), the saved trace's first divergence is its class
        assert replay(trace).divergence.class_key == row["class"], row
    # the second run went past examples of the first class: they are counted, not lost
    second = classes.found[1]
    assert second.masked.get(keys[0], 0) >= 1, second.masked
    assert keys[0] not in second.masked or second.divergence.class_key != keys[0]


def test_the_report_names_every_class_and_the_limit(classes):
    text = format_classes(classes)
    for key in classes.classes:
        assert key in text
    assert "the limit, 2: more may remain" in text
    data = classes.to_dict()
    assert [row["class"] for row in data["classes"]] == list(classes.classes)
    assert data["limited"] is True and data["result"] == "divergence"
    json.dumps(data)


def test_a_clean_pair_runs_once_and_passes():
    result = run_classes("oracle", "reference", limit=3, profile="ci", examples=15, out_dir=None)
    assert result.result == "pass" and result.found == () and not result.limited and result.last.masked == {}


def test_the_mask_is_what_lets_the_second_class_through(classes):
    """Without the first class known, the same seed stops at the first class again: the second is only
    seen because the first one's examples end."""
    alone = run_classes("oracle", MUTANT, limit=1, profile="ci", examples=100, shrink=False, out_dir=None)
    assert alone.classes == classes.classes[:1] and classes.classes[1] not in alone.classes


def test_a_matrix_cell_lists_its_other_classes():
    cell = Cell("1.0", "b", "divergence", part="tables", step_index=3,
                classes=[{"class": "tables@resize"}, {"class": "outcome@resume"}, {"class": "pool_used@close"}],
                limited=True)
    assert cell.describe() == ("divergence: tables at step 3 (+2 classes: outcome@resume, pool_used@close; "
                               "limit 4 reached)")
    # a cell run with a higher limit says its own limit, and says none where the search ended by itself
    higher = attrs.evolve(cell, class_limit=10)
    assert higher.describe().endswith("pool_used@close; limit 10 reached)")
    assert attrs.evolve(higher, limited=False).describe() == (
        "divergence: tables at step 3 (+2 classes: outcome@resume, pool_used@close)")


def test_cli_classes(tmp_path, capsys):
    from swafloor.cli import main

    assert main(["fuzz", "--mutate-reference", "sinks-released", "--profile", "ci", "--examples", "100",
                 "--no-shrink", "--classes", "2", "--out", str(tmp_path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert len(data["classes"]) == 2 and data["limited"] is True
    assert main(["fuzz", "--backend", "oracle", "--classes", "2", "--workers", "2"]) == 2
    assert "--classes runs one process" in capsys.readouterr().err
    assert main(["fuzz", "--backend", "oracle", "--classes", "0"]) == 2
