"""`swafloor explain` pictures (text, JSON, SVG, traces), the docs generator's markdown handling, and
simulating pools below the minimum."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from swafloor.cli import main
from swafloor.picture import picture, render_text
from swafloor.docs import markdown
from swafloor.reference import floors, lifecycle, sink_blocks_for
from swafloor.svg import block_svg, trace_svg
from tests import brute

ROOT = Path(__file__).resolve().parents[1]


def _expanded(pic: dict) -> str:
    """The token marks of every block, gaps expanded (small pictures only)."""
    out = []
    for it in pic["blocks"]:
        if it.get("gap"):
            out.append(it["mark"] * it["tokens_elided"])
        else:
            out.append("".join(m * n for m, n in it["runs"]))
    return "".join(out)


@pytest.mark.parametrize("t", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("w", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("sinks", [0, 3])
def test_picture_holds_what_the_brute_force_holds(t, w, sinks):
    for h in range(0, 3 * (w + t) + sinks):
        for n in (1, 3):
            pic = picture(w, t, sinks, h, step_tokens=n)
            live = brute.live_set(h, h + n, t, w, sinks)
            held = [b for it in pic["blocks"] if it["held"]
                    for b in (range(it["first"], it["last"] + 1) if it.get("gap") else [it["block"]])]
            assert pic["live_blocks"] == len(live) and sorted(held) == sorted(live), (t, w, sinks, h, n)
            marks = _expanded(pic)
            assert len(marks) == pic["allocated_blocks"] * t
            assert all(marks[p] == "*" for p in range(max(h, sinks), h + n))
            assert all(marks[p] == "S" for p in range(sinks) if p < h)
            assert pic["floor_blocks"] == floors.step_floor(t, w, sink_blocks_for(sinks, t), n)


@pytest.mark.parametrize("t,w,s", [(4, 5, 0), (4, 4, 0), (3, 7, 1), (1, 1, 0), (2, 3, 2)])
def test_hold_and_in_flight_pictures_match_the_reference(t, w, s):
    for h in range(1, 4 * (w + t)):
        hold = picture(w, t, s * t, h, hold=True)
        assert hold["live_blocks"] == lifecycle.transition_peak(h - 1, h, h + 1, t, w, s, True), h
        for k in (1, 2):
            fl = picture(w, t, s * t, h, in_flight=k)
            assert fl["live_blocks"] == lifecycle.live_blocks(max(0, h - k), h + 1, t, w, s), (h, k)
            assert fl["live_blocks"] <= floors.in_flight_floor(t, w, s, k)


@pytest.mark.parametrize("t,w,s", [(4, 5, 0), (4, 6, 0), (3, 7, 1), (1, 1, 0), (2, 3, 2)])
def test_first_resume_picture_matches_the_reference(t, w, s):
    for h in range(0, 4 * (w + t)):
        pic = picture(w, t, s * t, h, first_resume=True)
        assert pic["capacity"] == h
        assert pic["live_blocks"] == lifecycle.first_resume_peak(h, h, t, w, s), h
        assert sum(1 for it in pic["blocks"] if it.get("copy")) == (1 if h % t else 0)


def test_default_histories_show_each_worst_case(capsys):
    for argv, held in (
        (["--window", "5", "--tokens-per-block", "4", "--release-order", "hold-until-return"], 3),
        (["--window", "5", "--tokens-per-block", "4", "--in-flight", "1"], 3),
        (["--window", "5", "--tokens-per-block", "4", "--step-tokens", "4"], 3),
        (["--window", "4", "--tokens-per-block", "4"], 2),
        (["--window", "5", "--tokens-per-block", "4", "--first-resume"], 3),
    ):
        assert main(["explain", *argv, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["live_blocks"] == held, argv


@pytest.mark.parametrize("argv", [
    ["--window", "4", "--tokens-per-block", "4", "--history", str(10**12)],
    ["--window", "1000", "--tokens-per-block", str(10**9), "--history", str(10**9)],
    ["--window", str(10**9), "--tokens-per-block", "1", "--sink-tokens", "7", "--history", str(10**15)],
    ["--window", "4096", "--tokens-per-block", "32", "--step-tokens", str(10**12), "--history", "100"],
])
def test_huge_numbers_print_a_bounded_picture(argv, capsys, tmp_path):
    svg_file = tmp_path / "p.svg"
    assert main(["explain", *argv, "--svg", str(svg_file)]) == 0
    out = capsys.readouterr().out
    assert len(out) < 4000 and len(out.splitlines()) <= 10
    assert "tokens" in out
    ET.fromstring(svg_file.read_text())  # well-formed
    assert len(svg_file.read_text()) < 200_000


def test_elided_gap_counts_tokens():
    pic = picture(4, 4, 0, 10**12)
    gaps = [it for it in pic["blocks"] if it.get("gap")]
    assert gaps and gaps[0]["mark"] == "-" and not gaps[0]["held"]
    shown = sum(1 for it in pic["blocks"] if not it.get("gap")) + sum(g["blocks"] for g in gaps)
    assert shown == pic["allocated_blocks"]
    assert any(f"... {gaps[0]['tokens_elided']:,} tokens - ..." in line for line in render_text(pic))


def test_svg_is_deterministic_and_names_the_window():
    pic = picture(6, 4, 3, 17)
    one, two = block_svg(pic), block_svg(pic)
    assert one == two
    root = ET.fromstring(one)
    texts = " ".join(el.text or "" for el in root.iter() if el.tag.endswith("text"))
    assert "live window [12, 17]" in texts and "block 4" in texts and "sink token (its block is never released)" in texts


def test_trace_picture_marks_the_divergence(capsys, tmp_path):
    trace = ROOT / "tests" / "regressions" / "mutant-allocate-before-release.json"
    out = tmp_path / "trace.svg"
    assert main(["explain", "--trace", str(trace), "--svg", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["divergence_step"] == 3 and len(data["rows"]) == 4
    assert data["rows"][2]["pool_groups"] == [[["r0", 1]]]
    svg = out.read_text()
    ET.fromstring(svg)
    assert "diverged here" in svg and svg == trace_svg(data)


def test_trace_picture_runs_the_backend_beside_the_reference(capsys):
    trace = ROOT / "tests" / "regressions" / "mutant-allocate-before-release.json"
    assert main(["explain", "--trace", str(trace), "--backend", "mutant:allocate-before-release", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[3]["outcome"] == "ok" and rows[3]["backend"]["outcome"].startswith("out of slots")
    assert rows[2]["backend"]["pool_used"] == [1]
    assert main(["explain", "--trace", str(trace), "--backend", "oracle", "--json"]) == 0
    assert all(r["backend"]["outcome"] in ("ok",) for r in json.loads(capsys.readouterr().out)["rows"])


def test_explain_without_window_or_trace_is_one_line_exit_2(capsys):
    assert main(["explain", "--tokens-per-block", "4"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--window" in err


def test_simulate_any_pool_below_the_minimum(capsys):
    """One slot below the fixed floor deadlocks at the first history whose window straddles blocks."""
    assert main(["simulate", "--window", "4", "--tokens-per-block", "4", "--slots", "1", "--json"]) == 4
    result = json.loads(capsys.readouterr().out)
    first = next(h for h in range(40) if len(brute.live_set(h, h + 1, 4, 4, 0)) > 1)
    assert result["ok"] is False and result["failed_at_history"] == first and result["below_minimum"] is True
    assert result["min_slots"] == floors.swa_floor(4, 4, 0) and result["floor_rule"] == "fixed"


# ----------------------------------------------------------------------------- the generator's markdown
def test_transcripts_are_rerun_and_measured_ones_marked():
    text = "x\n```\n$ swafloor floor --window 4\nold output\n```\ny\n```\n$ swafloor fuzz\nold\n```\nz\n"
    outputs = {"swafloor floor --window 4": ["new output"], "swafloor fuzz": ["pass: 2.5 s"]}
    new = markdown.refresh_transcripts(text, ROOT, lambda c, r: outputs[c])
    assert "new output" in new and "old output" not in new
    assert markdown.MEASURED + "\n```\n$ swafloor fuzz\npass: 2.5 s\n```\n" + markdown.MEASURED_LINE in new
    again = markdown.refresh_transcripts(new, ROOT, lambda c, r: {**outputs, "swafloor fuzz": ["pass: 9.1 s"]}[c])
    assert again.count(markdown.MEASURED) == 1 and again.count(markdown.MEASURED_LINE) == 1
    assert markdown.normalise(again) == markdown.normalise(new) and again != new
    other = markdown.refresh_transcripts(new, ROOT, lambda c, r: {**outputs, "swafloor fuzz": ["fail at 7: 2.5 s"]}[c])
    assert markdown.normalise(other) != markdown.normalise(new)  # counts are compared, timings masked
    kept = markdown.refresh_transcripts(new, ROOT, lambda c, r: ["changed"], measured=False)
    assert "pass: 2.5 s" in kept and "changed" in kept


def test_generated_regions_and_unknown_sections():
    text = "a\n<!-- begin generated: s -->\nold\n<!-- end generated: s -->\nb"
    assert "new" in markdown.refresh_regions(text, {"s": lambda: "new"}, "p") and "old" not in \
        markdown.refresh_regions(text, {"s": lambda: "new"}, "p")
    with pytest.raises(markdown.DocsError, match="unknown generated section 's'"):
        markdown.refresh_regions(text, {}, "p")


def test_only_swafloor_commands_are_run():
    assert markdown.argv_of("swafloor floor --window 4  # note")[-2:] == ["--window", "4"]
    assert markdown.argv_of("python -m swafloor.fuzz.bench")[-1] == "swafloor.fuzz.bench"
    with pytest.raises(markdown.DocsError):
        markdown.argv_of("rm -rf /")


def test_build_keeps_an_edit_made_while_it_ran(tmp_path, monkeypatch):
    """The working tree is shared: a page edited while the commands ran keeps the edit."""
    from swafloor.docs import build

    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "a.md"
    page.write_text("# A\n\n```\n$ swafloor floor --window 4 --tokens-per-block 4\nold\n```\n")
    run = markdown.run_transcript

    def run_and_edit(command, root):
        out = run(command, root)
        page.write_text(page.read_text() + "\nadded meanwhile\n")
        return out

    monkeypatch.setattr(markdown, "run_transcript", run_and_edit)
    build(tmp_path, theorems=False)
    text = page.read_text()
    assert "added meanwhile" in text and "\nold\n" not in text and "floor" in text


@pytest.mark.parametrize("w,t,h", [(4, 2, 3), (5, 4, 5), (7, 3, 4), (40, 16, 37)])
def test_a_first_resume_copy_is_drawn_as_wide_as_its_block(w, t, h):
    """The private copy of a partially filled block is one block: its outline has the block's width."""
    import re

    from swafloor import svg
    from swafloor.picture import picture

    pic = picture(w, t, 0, h, first_resume=True)
    copied = [b["block"] for b in pic["blocks"] if b.get("copy")]
    assert copied, pic["blocks"]
    outlines = re.findall(r"<rect x='[\d.]+' y='[\d.]+' width='([\d.]+)' height='[\d.]+' fill='none' "
                          r"stroke='#(?:222222|999999)'", svg.block_svg(pic))
    drawn = [b for b in pic["blocks"] if not b.get("gap")]
    assert len(outlines) == len(drawn)
    width_of = {(b["block"], bool(b.get("copy"))): float(wd) for b, wd in zip(drawn, outlines)}
    for b in copied:
        assert width_of[(b, True)] == width_of[(b, False)]


def test_the_rule_card_figures_match_the_token_level_brute_force():
    """The rule card's picture and figures (W = 128, t = 32, one sink block): the blocks held at every
    history, the first history at the floor (160), the worst case decode-tight names (190) and 31 of
    every 32 histories at the floor, recounted token by token."""
    from swafloor.docs.pictures import HISTORY_EXAMPLE, history_census

    ex = HISTORY_EXAMPLE
    assert (ex["t"], ex["W"], ex["S"]) == (32, 128, 1)
    c = history_census(ex["t"], ex["W"], ex["S"], ex["h_max"])
    held = [len(brute.live_set(h, h + 1, 32, 128, 32)) for h in range(ex["h_max"] + 1)]
    assert c["held"] == held
    assert c["floor"] == max(held) == 6 and held.index(6) == c["first"] == 160 and held[190] == 6
    assert c["worst"] == 190 and c["at_floor_per_period"] == sum(1 for h in range(160, 192) if held[h] == 6) == 31
