"""vLLM's release profiles (issue 33): each release's semantics as data (fuzz/engines/vllm/profiles.py),
and the lost-hit rule ``prompt-end-recomputed`` (a first resume adopting its whole reused history as a
hit, on releases whose ``allocate_slots`` refuses a step that computes and loads nothing).

- The profile data: every change names an evidence trace that pins it on a release inside its range;
  a modelled change names a Semantics option the backends claim at another value; an unmodelled one
  names the divergence class its trace shows.
- On vLLM itself (the pinned venv, as tests/test_vllm_releases.py): each modelled change's evidence
  trace, which diverges on its release under the pinned semantics (tests/test_vllm_releases.py replays
  that), matches there under the release's profile.
- The rule on the reference: the longest hit short of the reused history's last token.
- ``compat.adopts_hit_alone`` reads the refusal's guard from ``allocate_slots``' source.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swafloor.fuzz import matrix
from swafloor.fuzz.engines.vllm import profiles
from swafloor.fuzz.engines.vllm.compat import adopts_hit_alone
from swafloor.fuzz.engines.vllm.matrix import RELEASES, VLLM
from swafloor.reference import AttentionLayer, Config, Manager, Semantics
from swafloor.reference.semantics import options

from .trace_class import class_of as _class_of
from .vllm_venv import VENV, matrix_venv as _venv

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "tests" / "regressions"

PREFIX = Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, prefix_sharing=True,
                   cache_freed=True, hit_rule="common-prefix", cache_scheduled=True)
MIXED = Semantics(**{**PREFIX.to_dict(), "cache_aligned": True, "cache_prompt_tail": True})


def _trace(change: profiles.Change) -> dict:
    return json.loads((REGRESSIONS / change.evidence).read_text(encoding="utf-8"))


@pytest.mark.parametrize("change", profiles.CHANGES, ids=lambda c: c.name)
def test_each_change_names_an_evidence_trace_inside_its_range(change):
    data = _trace(change)
    assert data["found"]["release"] == change.evidence_release and data["expect"] == "divergence"
    assert profiles.applies(change, change.evidence_release)
    assert not profiles.applies(change, change.since)  # the first release with the pinned behaviour
    assert change.since in RELEASES or matrix.release_key(change.since) < matrix.release_key(RELEASES[1])
    assert change.upstream
    if change.modelled:
        option = {o.name: o for o in options()}[change.option]
        assert isinstance(change.value, type(option.default))
        claimed = Semantics.from_dict(data["config"]["semantics"])  # what the backend claims (the pinned release's)
        assert getattr(claimed, change.option) != change.value
    else:
        assert _class_of(data) == change.class_key
        assert change.backends
    for class_key, trace in change.also.items():  # each other class it shows, by a trace of its own
        other = json.loads((REGRESSIONS / trace).read_text(encoding="utf-8"))
        assert _class_of(other) == class_key and other["expect"] == "divergence", trace
        assert other["found"]["release"] == change.evidence_release, trace
        assert other["backend"] in change.backends or other["backend"] == data["backend"], trace


def test_profiles_per_release():
    """The bisected ranges, read from the evidence traces' verdicts: no partial prompt-tail entry before
    0.26.0; every full SWA block cached before 0.22.1; every freed block to the free queue's end before
    0.23.0 (from 0.9.2, where freed blocks are cached), and on 0.23.0 those a request's release frees in
    full attention; nothing else the reference expresses differs."""
    tail, aligned, to_tail = {"cache_prompt_tail": False}, {"cache_aligned": False}, {"uncached_to_tail": True}
    release = {"release_uncached_to_tail": True}  # 0.23.0: a release appends a full-attention group's blocks
    want = {"0.14.1": ({**tail, **aligned, **to_tail}, to_tail), "0.21.0": ({**tail, **aligned, **to_tail}, to_tail),
            "0.22.1": ({**tail, **to_tail}, to_tail), "0.23.0": ({**tail, **release}, release), "0.24.0": (tail, {}),
            "0.25.1": (tail, {}), "0.26.0": ({}, {}), "0.33.0": ({}, {})}
    for release, (mixed, one_size) in want.items():
        got = profiles.profile_semantics(release, MIXED)
        assert got == Semantics(**{**MIXED.to_dict(), **mixed}), release
        assert profiles.profile_semantics(release, PREFIX) == Semantics(**{**PREFIX.to_dict(), **one_size}), release
        assert profiles.profile_semantics(release, Semantics()) == Semantics()  # no cache: nothing it can take
    for release in ("0.22.1", "0.23.0", "0.24.0"):  # free-path-before-0.24 is modelled since issue 33
        assert profiles.unmodelled(release, "vllm-prefix-eagle") == (), release
    assert profiles.profile_of("0.23.0", PREFIX)["release_uncached_to_tail"] == (True, "free-path-before-0.24")
    assert profiles.unmodelled("0.8.3", "vllm") == ()  # pre-allocation is modelled (preallocate_tokens)
    assert profiles.unmodelled("0.13.0", "vllm-prefix") == profiles.unmodelled("0.9.2", "vllm-prefix-mixed") == ()
    assert profiles.unmodelled("0.14.1", "vllm-prefix") == ()
    load = {"load_holds_prefix": True}  # a KV-connector load holding every loaded token, 0.8.3-0.13.0
    plain = Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False)
    prealloc = {**load, "preallocate_tokens": 64}  # 0.8.3: num_preallocate_tokens, removed in 0.8.5
    for release, want in (("0.8.3", prealloc), ("0.8.5.post1", load), ("0.13.0", load), ("0.14.1", {}), ("0.33.0", {})):
        assert profiles.profile_semantics(release, plain) == Semantics(**{**plain.to_dict(), **want}), release
    # with prefix caching on too (issue 33: the load starts past the hit), with the free queue of before 0.23.0
    for release, want in (("0.11.2", {**load, "uncached_to_tail": True}), ("0.13.0", {**load, "uncached_to_tail": True}),
                          ("0.14.1", {"uncached_to_tail": True})):
        assert profiles.profile_semantics(release, PREFIX) == Semantics(**{**PREFIX.to_dict(), **want}), release
    assert profiles.profile_of("0.11.2", PREFIX)["load_holds_prefix"] == (True, "connector-load-past-a-hit")
    # issue 33: past the load the matrix met the free queue on 0.9.2-0.10.2 and the mixed cache rules on 0.12.0-0.13.0
    assert profiles.profile_semantics("0.9.2", PREFIX) == Semantics(**{**PREFIX.to_dict(), **load, "uncached_to_tail": True})
    # issue 33, 0.8.x's prefix backends driven: the same free queue, and 0.8.3's pre-allocation
    assert profiles.profile_semantics("0.8.5.post1", PREFIX) == Semantics(
        **{**PREFIX.to_dict(), **load, "uncached_to_tail": True})
    assert profiles.profile_semantics("0.8.3", PREFIX) == Semantics(
        **{**PREFIX.to_dict(), **load, "uncached_to_tail": True, "preallocate_tokens": 64})
    for release in ("0.12.0", "0.13.0"):
        want = {**load, "uncached_to_tail": True, "cache_prompt_tail": False, "cache_aligned": False}
        assert profiles.profile_semantics(release, MIXED) == Semantics(**{**MIXED.to_dict(), **want}), release


def test_the_cell_record_carries_the_profile():
    """What a cell reports: the options its release has otherwise (the release's values) and the
    unmodelled changes by name and class; a backend claiming none of the options is left as it is."""
    from swafloor.fuzz.backends import resolve

    record = resolve("vllm-prefix-mixed")
    got, profile, unmodelled = matrix._profiled(VLLM, "0.21.0", record)
    assert profile == {"cache_prompt_tail": False, "cache_aligned": False, "uncached_to_tail": True}
    assert got.capabilities.semantics == Semantics(**{**MIXED.to_dict(), "cache_prompt_tail": False,
                                                      "cache_aligned": False, "uncached_to_tail": True})
    assert unmodelled == []
    got, profile, unmodelled = matrix._profiled(VLLM, "0.22.1", resolve("vllm-prefix"))
    assert profile == {"uncached_to_tail": True} and unmodelled == []
    got, profile, unmodelled = matrix._profiled(VLLM, "0.23.0", resolve("vllm-prefix-eagle"))
    assert profile == {"release_uncached_to_tail": True} and unmodelled == []
    assert got.capabilities.semantics.release_uncached_to_tail
    plain = resolve("vllm")  # no prefix cache: no option of the profile applies
    same, profile, _ = matrix._profiled(VLLM, "0.21.0", plain)
    assert profile == {} and same.capabilities.semantics == plain.capabilities.semantics


def test_a_cell_names_the_known_classes_it_met():
    """verdicts.classify: a class key met on a release and backend inside a known bug's range names that
    bug with its fix; an unmodelled change's class names it; outside the ranges, nothing."""
    from swafloor.fuzz.engines.vllm.verdicts import BUGS, LIMITATIONS, classify

    assert classify("0.25.1", "vllm-async", "tables@resize") == [
        "async-frees-in-flight-read (bug, vllm-project/vllm#47728)"]
    assert classify("0.26.0", "vllm-async", "tables@resize") == []  # the fix's release
    assert classify("0.25.1", "vllm-async", "slots@resize") == []  # another class: a candidate, unnamed
    assert classify("0.23.0", "vllm-prefix", "slots@resume") == []  # free-path-before-0.24, modelled since issue 33
    assert classify("0.24.0", "vllm-prefix", "slots@resume") == []
    assert classify("0.21.0", "vllm-async", "outcome@resize") == classify("0.21.0", "vllm-async", "tables@resize")
    # issue 33's cells rerun with a class limit of 10: the 0.22.1 mixed cell's lost hit is eagle-aligned-only's (the
    # spiral drop's hit@resume ends at 0.20.2); 0.9.2-0.13.0's resume out of slots is the spiral drop's
    assert classify("0.22.1", "vllm-prefix-eagle-mixed", "hit@resume") == [
        "eagle-aligned-only (bug, vllm-project/vllm#44082)"]
    assert classify("0.23.0", "vllm-prefix-eagle-mixed", "hit@resume") == []
    assert classify("0.9.2", "vllm-prefix-eagle", "outcome@resume") == ["eagle-spiral-drop (bug, vllm-project/vllm#32802)"]
    for bug in (*BUGS, *LIMITATIONS):  # each class names a trace that diverges as it, in its range, on its backend
        for class_key, trace in bug.traces.items():
            data = json.loads((REGRESSIONS / trace).read_text(encoding="utf-8"))
            assert _class_of(data) == class_key, bug.name
            assert data["expect"] == "divergence" and data["backend"] in bug.backends, bug.name
            release = data["found"]["release"]
            assert bug.applies(release, data["backend"]) or matrix.release_key(release) < matrix.release_key(bug.first)
            # the pinned release builds and serves it; a trace stored under its release's profile (whose options the
            # pinned release lacks, found.under_profile) diverges there by those options
            assert data["found"]["on_pinned"] == "match" or data["found"].get("under_profile") is True, bug.name


def test_the_build_assertions_and_the_load_outcome_are_named():
    """Issue 33's unnamed classes of the stored matrix: the build divergences are vLLM's own assertions
    (engine limitations, each with the change that lifted it, bisected by its trace: 0.8.x serves one
    KV-cache group; 0.9.2's hybrid coordinator, prefix caching off too, and 0.9.2-0.13.0's with prefix
    caching on, serve one sliding window beside full attention); a first resume out of slots on
    0.8.5-0.13.0 is the connector load's other face (its trace bisected: diverges up to 0.13.0, matches
    from 0.14.1): modelled (load_holds_prefix in the profile), with prefix caching on too."""
    from swafloor.fuzz.engines.vllm.verdicts import classify

    one_group = "one-kv-cache-group (engine limitation, lifted by vllm-project/vllm#17996)"
    no_caching = "hybrid-two-windows-no-caching (engine limitation, lifted by vllm-project/vllm#20661)"
    caching = "hybrid-two-windows (engine limitation, lifted by vllm-project/vllm#31707)"
    for backend in ("vllm", "vllm-no-reuse", "vllm-prefix", "vllm-prefix-eagle", "dataplane:vllm-prefix"):
        assert classify("0.8.3", backend, "build@build") == classify("0.8.5.post1", backend, "build@build") == [one_group]
    for backend in ("vllm", "vllm-no-reuse"):
        assert classify("0.9.2", backend, "build@build") == [no_caching]
        assert classify("0.10.2", backend, "build@build") == []
    for backend in ("vllm-prefix", "vllm-prefix-eagle", "vllm-prefix-mixed", "vllm-prefix-eagle-mixed",
                    "dataplane:vllm-prefix"):
        assert classify("0.9.2", backend, "build@build") == classify("0.13.0", backend, "build@build") == [caching]
        assert classify("0.14.1", backend, "build@build") == []
    for release in ("0.8.5.post1", "0.10.2", "0.13.0"):  # modelled for vllm: its cells compare like with like
        assert classify(release, "vllm", "outcome@resume") == classify(release, "vllm", "tables@resume") == []
    # 0.8.3's first resume past its load: pre-allocation's resume face, modelled since issue 33 (preallocate_tokens)
    assert classify("0.8.3", "vllm", "tables@resume") == classify("0.8.5.post1", "vllm", "tables@resume") == []
    # with prefix caching on, modelled too since issue 33 (the load starts past the first resume's hit)
    assert classify("0.12.0", "vllm-prefix-mixed", "outcome@resume") == []
    assert classify("0.9.2", "vllm-prefix", "tables@resume") == []
    # 0.8.x's prefix backends (issue 33): the null block counted as an evictable hit block (fixed by 0.9.2), the
    # EAGLE pop leaving a hit on a null entry (0.8.5), and the parent-hash crash at a resize (0.8.x-0.9.2)
    evictable = "null-hit-counted-evictable (bug, vllm-project/vllm#19031)"
    pop = "eagle-pop-onto-null-entry (bug, vllm-project/vllm#17398)"
    parent = "parent-hash-from-null-entry (bug, vllm-project/vllm#19728)"
    assert classify("0.8.3", "vllm-prefix", "outcome@resume") == [evictable]
    assert classify("0.8.5.post1", "vllm-prefix-eagle", "outcome@resume") == [pop, evictable]
    assert classify("0.8.5.post1", "vllm-prefix-eagle", "tables@resume") == [pop]
    assert classify("0.8.5.post1", "vllm-prefix-eagle", "outcome@resize") == classify("0.9.2", "vllm-prefix", "outcome@resize") == [parent]
    assert pop not in classify("0.9.2", "vllm-prefix-eagle", "outcome@resume") and classify("0.9.2", "vllm-prefix", "outcome@resume") == []
    assert classify("0.14.1", "vllm-prefix-mixed", "outcome@resume") == []




MODELLED = [c for c in profiles.CHANGES if c.modelled]


@pytest.mark.parametrize("release", sorted({c.evidence_release for c in MODELLED}, key=matrix.release_key))
def test_evidence_traces_match_under_their_release_profile(release):
    venv = _venv()
    paths = [REGRESSIONS / name for c in MODELLED if c.evidence_release == release for name in (c.evidence, *c.also.values())]
    got = matrix.replay_traces(release, paths, venv, matrix.cache_root(None, "vllm"), profile=True)
    assert [r["verdict"] for r in got] == ["match"] * len(paths), got


# ----------------------------------------------------------------------------- the lost-hit rule
def _shared(window: int, t: int, source: int, reused: int) -> Manager:
    m = Manager(Config(t, [AttentionLayer(window)], slots=[40], semantics=PREFIX))
    m.create("r0", reused_history=source)
    assert m.resume("r0").ok
    m.create("r1", reused_history=reused, share_with="r0")
    return m


@pytest.mark.parametrize("window, t, source, reused, longest, rule", [
    (2, 1, 1, 1, 1, 0),  # the trace's case: the whole reused token is a hit; the rule stops before it
    (4, 2, 4, 4, 4, 2),  # a whole-history hit of two blocks: the rule keeps the first
    (4, 2, 4, 3, 2, 2),  # the longest hit stops short of the last token already: the rule yields the same
])
def test_prompt_end_rule_yields_the_longest_hit_short_of_the_last_token(window, t, source, reused, longest, rule):
    m = _shared(window, t, source, reused)
    assert m.longest_hit("r1") == longest
    assert m.rule_hit("r1", "prompt-end-recomputed") == rule
    assert m.hit_is_valid("r1", rule)
    assert m.resume("r1", hit_tokens=rule).ok  # the reference takes the lost hit


# ----------------------------------------------------------------------------- reading the refusal's guard
def _refuses(request, num_new_tokens, num_new_computed_tokens=0, num_external_computed_tokens=0):
    if num_new_tokens == 0 and num_external_computed_tokens == 0:
        raise ValueError("num_new_tokens must be greater than 0 when there are no external computed tokens")
    return num_new_computed_tokens


def _adopts(request, num_new_tokens, num_new_computed_tokens=0, num_external_computed_tokens=0):
    if (
        num_new_tokens == 0
        and num_external_computed_tokens == 0
        and num_new_computed_tokens == 0
    ):
        raise ValueError("num_new_tokens must be greater than 0 when there are no computed tokens to adopt")
    return num_new_computed_tokens


def test_adopts_hit_alone_reads_the_guard_of_the_refusal():
    assert not adopts_hit_alone(_refuses)
    assert adopts_hit_alone(_adopts)
    assert not adopts_hit_alone(len)  # no source: never asked
