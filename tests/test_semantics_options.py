"""Each ``Semantics`` option is declared once (``reference.semantics.option``), and everything else is
read from that declaration: checks, ``to_dict``/``from_dict``, the docs table, the CLI flags and the
``Capabilities`` mirrors (issue 29). A throwaway option, declared here at test time, gets all of them
without an edit anywhere else."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import attrs
import pytest

from swafloor.commands._common import add_semantics_arguments, semantics_from_args
from swafloor.docs.sections import semantics_options as semantics_table
from swafloor.fuzz.protocol import ALL_SEMANTICS, Capabilities, semantics_mirrors, with_semantics_mirrors
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics
from swafloor.reference.semantics import option, options, semantics_with

REGRESSIONS = Path(__file__).resolve().parent / "regressions"

THROWAWAY = option(0, "a throwaway count", "Declared by a test only: nothing reads it but its layer.",
                   engines=("no engine",), needs=("prefix_sharing", True), drawn_apart="throwaway counts")


@pytest.fixture(scope="module")
def extended():
    return semantics_with(throwaway=THROWAWAY)


def test_every_option_declares_its_summary_doc_and_engines():
    declared = options()
    assert [o.name for o in declared] == [f.name for f in attrs.fields(Semantics)]
    for o in declared:
        assert o.summary and o.doc and o.engines, o.name
        assert f"``{o.name}``" in Semantics.__doc__ and o.doc in " ".join(Semantics.__doc__.split()), o.name


def test_a_throwaway_option_round_trips_and_is_checked(extended):
    assert [o.name for o in options(extended)][-1] == "throwaway"
    assert extended().to_dict() == Semantics().to_dict()  # off its default only is it written
    on = extended(prefix_sharing=True, throwaway=3)
    assert on.to_dict() == {**Semantics(prefix_sharing=True).to_dict(), "throwaway": 3}
    assert extended.from_dict(json.loads(json.dumps(on.to_dict()))) == on
    with pytest.raises(ConfigError, match=r"semantics\.throwaway=-1: must be >= 0"):
        extended(throwaway=-1)
    with pytest.raises(ConfigError, match=r"semantics\.throwaway=2: needs semantics\.prefix_sharing"):
        extended(throwaway=2)
    with pytest.raises(ConfigError, match=r"config\.semantics\.throwaway"):
        Semantics.from_dict({"throwaway": 1})  # the reference's own class does not know it
    stored = [json.loads(p.read_text(encoding="utf-8"))["config"].get("semantics") for p in REGRESSIONS.glob("*.json")]
    assert len([s for s in stored if s]) >= 20
    for semantics in filter(None, stored):  # stored traces read and write the same with it declared
        written = Semantics.from_dict(semantics).to_dict()
        assert extended.from_dict(semantics).to_dict() == written and semantics.items() <= written.items()


def test_a_throwaway_option_gets_its_cli_flag(extended):
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_semantics_arguments(parser, extended)
    args = parser.parse_args(["--throwaway", "3", "--prefix-sharing", "--in-flight", "1"])
    assert semantics_from_args(args, extended) == extended(throwaway=3, prefix_sharing=True, in_flight_tokens=1)
    assert semantics_from_args(parser.parse_args([]), extended) == extended()
    with pytest.raises(ConfigError, match="needs semantics.prefix_sharing"):
        semantics_from_args(parser.parse_args(["--throwaway", "3"]), extended)
    plain = argparse.ArgumentParser()
    add_semantics_arguments(plain)
    assert "--throwaway" not in plain.format_help() and "--throwaway" in parser.format_help()


def test_a_throwaway_option_is_in_the_docs_table(extended):
    row = next(line for line in semantics_table(extended).splitlines() if line.startswith("| `throwaway` |"))
    assert row == ("| `throwaway` | a throwaway count | `0` | an integer >= 0 | `prefix_sharing` | no engine |")
    assert "`throwaway`" not in semantics_table()


def test_a_throwaway_option_gets_its_capabilities_mirror(extended):
    @attrs.frozen
    @with_semantics_mirrors(extended)
    class ExtendedCapabilities(Capabilities):
        pass

    assert [o.name for o in semantics_mirrors(ExtendedCapabilities)][-1] == "throwaway"
    assert "throwaway" not in attrs.fields_dict(Capabilities)
    caps = ExtendedCapabilities(all_semantics=True, throwaway=True)
    assert caps.throwaway and not ExtendedCapabilities().throwaway
    assert caps.describe() == ALL_SEMANTICS.describe().replace("drawn per example", "drawn per example; throwaway counts")


def test_a_throwaway_option_needs_only_its_layer_in_the_manager(extended):
    """The manager takes a config with the extended semantics; until a layer reads the option it
    behaves exactly as the same semantics without it. Its layer (here a test-local one) reads it by name."""
    sides = []
    for semantics in (Semantics(prefix_sharing=True), extended(prefix_sharing=True, throwaway=2)):
        config = Config(tokens_per_block=2, layers=[AttentionLayer(window=3)], slots=[6], semantics=semantics)
        m = Manager(config)
        m.create("r0", reused_history=3)
        assert m.resume("r0").ok and m.resize("r0", 8, 3).ok
        m.commit("r0", 5)
        sides.append((repr(m.snapshot()), getattr(config.semantics, "throwaway", 0)))
    assert sides[0][0] == sides[1][0] and [layer for _, layer in sides] == [0, 2]


def test_simulate_takes_a_flag_per_option(capsys):
    from swafloor.cli import main

    assert main(["simulate", "--window", "5", "--tokens-per-block", "4", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--window", "5", "--tokens-per-block", "4", "--in-flight", "1", "--json"]) == 0
    in_flight = json.loads(capsys.readouterr().out)
    # the in-flight floor S + ceil((W-1+k)/t) + 1 at W = 5, t = 4, k = 1: 3 slots, where k = 0 needs 2
    assert (plain["min_slots"], in_flight["min_slots"]) == (2, 3)
    assert main(["simulate", "--window", "5", "--tokens-per-block", "4", "--eagle"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["swafloor simulate: semantics.eagle=True: needs semantics.hit_rule common-prefix"]
