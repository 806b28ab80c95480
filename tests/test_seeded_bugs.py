"""The one list of seeded bugs (swafloor.reference.seeded_bugs) is what the proofs seed in the
formulas, what the fuzz registry builds as mutant backends, and what the docs show: each bug once."""

from __future__ import annotations

from pathlib import Path

from swafloor.docs.sections import seeded_bugs_table
from swafloor.fuzz.backends import DATA_MUTANT_NAMES, MUTANT_NAMES, REGISTRY, resolve
from swafloor.fuzz.backends.mutants import MUTANTS
from swafloor.proofs import catalogue, mutations
from swafloor.reference.seeded_bugs import CAMPAIGNS, DATA_PLANE, ORACLE, SEEDED_BUGS, TABLE_ONLY, SeededBug, seeded_bug

ROOT = Path(__file__).resolve().parents[1]


def test_each_bug_is_named_once_and_names_real_theorems_and_campaigns():
    names = [bug.name for bug in SEEDED_BUGS]
    assert len(set(names)) == len(names)
    theorems = {t.name for t in catalogue.CATALOGUE}
    for bug in SEEDED_BUGS:
        assert bug.theorems or bug.campaigns, f"{bug.name} is seeded nowhere"
        assert set(bug.theorems) <= theorems, (bug.name, set(bug.theorems) - theorems)
        assert set(bug.campaigns) <= set(CAMPAIGNS)
    assert seeded_bug("floor-division").theorems and seeded_bug("floor-division").campaigns


def test_the_proofs_seed_exactly_the_bugs_that_name_theorems():
    in_formulas = [bug for bug in SEEDED_BUGS if bug.theorems]
    assert [m.name for m in mutations.MUTATIONS] == [bug.name for bug in in_formulas]
    assert set(mutations.PATCHES) == {bug.name for bug in in_formulas}
    for m, bug in zip(mutations.MUTATIONS, in_formulas):
        assert m.expected == bug.theorems and m.description == bug.description


def test_the_registry_builds_exactly_the_bugs_that_name_campaigns():
    as_backends = {f"mutant:{bug.name}" for bug in SEEDED_BUGS if {TABLE_ONLY, DATA_PLANE} & set(bug.campaigns)}
    assert {name for name in REGISTRY if name.startswith("mutant:")} == as_backends == set(MUTANTS)
    assert set(MUTANT_NAMES) == {f"mutant:{b.name}" for b in SEEDED_BUGS if TABLE_ONLY in b.campaigns}
    assert DATA_MUTANT_NAMES == tuple(f"mutant:{b.name}" for b in SEEDED_BUGS if b.campaigns == (DATA_PLANE,))
    for name in as_backends:
        assert resolve(name).display_name == name


def test_the_reference_mutants_are_exactly_the_bugs_the_oracle_catches():
    from swafloor.fuzz.backends.reference_mutants import REFERENCE_MUTANTS

    assert list(REFERENCE_MUTANTS) == [bug.name for bug in SEEDED_BUGS if ORACLE in bug.campaigns]
    for bug in SEEDED_BUGS:
        if ORACLE in bug.campaigns:
            mutant = REFERENCE_MUTANTS[bug.name]
            assert (mutant.description, mutant.covers) == (bug.description, bug.covers) and bug.covers


def test_a_campaign_outside_the_list_is_refused():
    try:
        SeededBug("x", "y", (), ("gpu",))
    except ValueError as exc:
        assert "gpu" in str(exc)
    else:
        raise AssertionError("an unknown campaign was accepted")


def test_the_docs_show_the_list():
    table = seeded_bugs_table()
    assert table in (ROOT / "docs" / "fuzzing.md").read_text(encoding="utf-8")
    for bug in SEEDED_BUGS:
        assert f"| `{bug.name}` |" in table
