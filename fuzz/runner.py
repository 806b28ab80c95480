"""Running a fuzzing campaign: Hypothesis drives the differential machine for N examples; the first
divergence is shrunk, saved as a JSON trace, and reported with the whole input and a replay command.

Profiles: ``standard`` (``swafloor fuzz``'s default: a fixed seed, more rules per example and long
batched-decoding runs: most compared steps per Hypothesis draw), ``ci`` (the same seed and examples
with shorter runs: what CI's campaigns use, :func:`run_campaign`'s default) and ``nightly`` (a fresh random seed, long runs, longer traces). The seed used is always
reported, so any run can be repeated.

The report also says how well the generator fits the backend: the share of examples discarded
because the backend refused the config (``Unsupported``; target at most :data:`MAX_DISCARD_RATE`) and
the share of served examples with a sliding-window life cycle (target at least
:data:`MIN_SWA_SHARE`); and where the time went: the backend's import (its ``prepare()``, done before
the campaign and not counted in ``seconds``), and each side's time in its operations, with the
steps per second that gives.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from pathlib import Path
from typing import Any, Callable

import attrs
from hypothesis import HealthCheck, Phase, Verbosity, seed as hypothesis_seed, settings
from hypothesis.errors import HypothesisException, Unsatisfiable
from hypothesis.stateful import run_state_machine_as_test

from swafloor.reference import SwafloorError

from .backends import resolve
from .protocol import BackendRecord
from .compare import Divergence
from .machine import BATCH_ROUNDS, DivergenceFound, Stats, build_machine
from .reduce import reduce_trace
from .stream import source_blind
from .replay import replay_command
from .retired import MAX_RETIRED_SHARE, RetiredVerdict
from .trace import Trace, save, to_dict

__all__ = [
    "Profile",
    "PROFILES",
    "CampaignResult",
    "CampaignError",
    "run_campaign",
    "format_report",
    "DEFAULT_OUT",
    "MAX_DISCARD_RATE",
    "MIN_SWA_SHARE",
]

DEFAULT_OUT = Path("fuzz-failures")
#: Targets for every shipped backend: at most this share of examples discarded as Unsupported ...
MAX_DISCARD_RATE = 0.05
#: ... and at least this share of served examples with a sliding-window life cycle.
MIN_SWA_SHARE = 0.5
#: ... and, where requests are created under prefix sharing, at least this share hit a shared block.
MIN_HIT_RATE = 0.3


@attrs.frozen
class Profile:
    """Defaults of a kind of run: examples, steps (rules) per example, the seed (None: random), and
    the most rounds one batched-decoding rule draws (``batch_rounds``: the rule that makes most of
    the compared steps; longer runs spread Hypothesis's cost per rule over more steps, and lengthen
    every example)."""

    name: str
    examples: int
    steps: int
    seed: int | None
    batch_rounds: int = BATCH_ROUNDS
    #: The tokens per block its configs draw from (None: every size of :data:`~.strategies.TOKENS_PER_BLOCK`).
    tokens_per_block: tuple[int, ...] | None = None


PROFILES = {
    "standard": Profile("standard", examples=2000, steps=16, seed=0, batch_rounds=4096),
    "ci": Profile("ci", examples=2000, steps=12, seed=0),
    "nightly": Profile("nightly", examples=50_000, steps=40, seed=None),
    # Large pages only (SGLang's page sizes 64 and 256, issue 33): windows, prefill chunks and reserved
    # runs are drawn in units of the page (strategies.windows, machine.horizon), so pages fill, straddle a
    # window's edge and are evicted; decode batches run long enough to cross a page of 256.
    "pages": Profile("pages", examples=300, steps=12, seed=0, batch_rounds=1024, tokens_per_block=(64, 256)),
}


class CampaignError(SwafloorError):
    """The campaign could not run (e.g. the backend serves no generated config)."""


@attrs.frozen
class CampaignResult(RetiredVerdict):
    """The outcome of a campaign."""

    backend: str
    against: str
    profile: str
    seed: int
    examples: int  # examples completed (what Hypothesis counts), shrinking included
    runs: int  # state machine runs started, including ones Hypothesis discarded
    steps: int  # operations applied on each side
    seconds: float  # the campaign, the backend's import (import_seconds) excluded
    divergence: Divergence | None = None
    trace: Trace | None = None
    trace_file: Path | None = None
    first_failure_example: int | None = None  # examples run when the first divergence was seen
    first_failure_seconds: float | None = None
    backend_spec: str | None = None  # the name or MODULE:FACTORY it was resolved from (for replay)
    unsupported: int = 0  # runs discarded: the backend refused the config
    served: int = 0  # runs whose backend was built
    served_swa: int = 0  # of those, with a sliding-window life cycle
    served_semantics: int = 0  # of those, with semantics other than the default (the spec's)
    created_sharing: int = 0  # requests created under prefix sharing semantics
    on_prefix: int = 0  # of those, created on another request's committed prefix
    hits: int = 0  # of those, requests whose first resume took a shared block (a cache hit)
    lost_hits: int = 0  # first resumes (shrinking's included) that took a valid hit shorter than the longest
    lost_hits_by_rule: dict = attrs.field(factory=dict)  # lost-hit rule name -> lost hits it explains
    first_lost_hit: dict | None = None  # the first: example, step_index, request, longest, taken, rule
    lost_hit_file: Path | None = None  # its trace (it replays the lost hit; expects a match)
    requests: int = 0  # requests created (both sides)
    retired: int = 0  # of those, retired after an accepted outcome slack (left out of later comparison)
    retire_limited: bool = False  # one-sided outcome: more than MAX_RETIRED_SHARE retired fails
    import_seconds: float = 0.0  # resolving the backend and its prepare() (slow imports)
    backend_seconds: float = 0.0  # in the backend's operations, observations and builds
    reference_seconds: float = 0.0  # likewise on the side compared against
    domain: str | None = None  # what the backend's capabilities keep out of the generated domain
    masked: dict = attrs.field(factory=dict)  # known class -> examples that ended in it (known_classes)

    @property
    def discard_rate(self) -> float:
        tried = self.unsupported + self.served
        return self.unsupported / tried if tried else 0.0

    @property
    def swa_share(self) -> float:
        return self.served_swa / self.served if self.served else 0.0

    @property
    def semantics_share(self) -> float:
        return self.served_semantics / self.served if self.served else 0.0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.created_sharing if self.created_sharing else 0.0

    @property
    def on_target(self) -> bool:
        """Whether the generator fits the backend: discards and SWA share within their targets. (The
        hit rate is printed against its own target, ``hits_met`` in JSON: see hits_on_target.)"""
        return self.discard_rate <= MAX_DISCARD_RATE and self.swa_share >= MIN_SWA_SHARE

    @property
    def hits_on_target(self) -> bool:
        return self.hit_rate >= MIN_HIT_RATE

    def steps_per_second(self, seconds: float) -> float | None:
        return round(self.steps / seconds, 1) if seconds > 0 else None

    @property
    def retired_share(self) -> float:
        return self.retired / self.requests if self.requests else 0.0

    @property
    def diverged(self) -> bool:
        return self.divergence is not None

    @property
    def replay(self) -> str | None:
        if self.trace_file is None:
            return None
        return replay_command(str(self.trace_file), self.backend_spec or self.backend, self.against)

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {
            "domain": self.domain,
            "seed": self.seed,
            "import_seconds": round(self.import_seconds, 3),
            "unsupported": self.unsupported,
            "served": self.served,
            "discard_rate": round(self.discard_rate, 4),
            "swa_share": round(self.swa_share, 4),
            "semantics_share": round(self.semantics_share, 4),
            "requests": self.requests,
            "retired": self.retired,
            "retired_share": round(self.retired_share, 4),
            "max_retired_share": MAX_RETIRED_SHARE if self.retire_limited else None,
            **({"created_sharing": self.created_sharing, "on_prefix": self.on_prefix, "hits": self.hits, "hit_rate": round(self.hit_rate, 4)}
               if self.created_sharing else {}),
            "targets": {"max_discard_rate": MAX_DISCARD_RATE, "min_swa_share": MIN_SWA_SHARE,
                        **({"min_hit_rate": MIN_HIT_RATE, "hits_met": self.hits_on_target} if self.created_sharing else {}),
                        "met": self.on_target},
            "backend_seconds": round(self.backend_seconds, 3),
            "reference_seconds": round(self.reference_seconds, 3),
            "backend_steps_per_second": self.steps_per_second(self.backend_seconds),
            "reference_steps_per_second": self.steps_per_second(self.reference_seconds),
            **({"lost_hits": self.lost_hits, "lost_hits_by_rule": dict(sorted(self.lost_hits_by_rule.items())),
                "first_lost_hit": {**self.first_lost_hit,
                                   "trace_file": None if self.lost_hit_file is None else str(self.lost_hit_file)}}
               if self.first_lost_hit is not None else {}),
        }
        if self.masked:
            extra["masked"] = dict(self.masked)
        if self.backend_spec is not None and self.backend_spec != self.backend:
            extra["backend_spec"] = self.backend_spec
        return summary_dict(self.result, self.backend, self.against, self.profile, self.examples, self.runs,
                            self.steps, self.seconds, self if self.divergence is not None else None, extra)


def summary_dict(result: str, backend: str, against: str, profile: str, examples: int, runs: int, steps: int,
                 seconds: float, failure: CampaignResult | None, extra: dict[str, Any]) -> dict[str, Any]:
    """The JSON summary of a campaign, one process's (:meth:`CampaignResult.to_dict`) or several
    workers' (:meth:`swafloor.fuzz.workers.WorkersResult.to_dict`), in one layout: the counts, then what
    is particular to the kind (``extra``), then, when it diverged, the failing campaign's seed, first
    failure, divergence, trace file, replay command and trace."""
    data: dict[str, Any] = {
        "result": result,
        "backend": backend,
        "against": against,
        "profile": profile,
        "examples": examples,
        "runs": runs,
        "steps": steps,
        "seconds": round(seconds, 3),
        "steps_per_second": round(steps / seconds, 1) if seconds > 0 else None,
        "examples_per_second": round(examples / seconds, 1) if seconds > 0 else None,
        **extra,
    }
    if failure is not None:
        data["seed"] = failure.seed
        data["first_failure_example"] = failure.first_failure_example
        data["first_failure_seconds"] = (
            None if failure.first_failure_seconds is None else round(failure.first_failure_seconds, 3)
        )
        data["divergence"] = None if failure.divergence is None else failure.divergence.to_dict()
        data["trace_file"] = None if failure.trace_file is None else str(failure.trace_file)
        data["replay"] = failure.replay
        data["trace"] = None if failure.trace is None else to_dict(failure.trace)
    return data


def retire_limited(caps: Any) -> bool:
    """Whether a campaign of a backend with these capabilities fails above MAX_RETIRED_SHARE retired
    requests: its outcome is one-sided or retires either way (with an exact outcome a slack is a divergence,
    never a retirement)."""
    from .protocol import Comparison, Part

    return caps.mode(Part.OUTCOME) in (Comparison.AT_LEAST, Comparison.RETIRES)


def domain_of(caps: Any) -> str | None:
    """What a backend's capabilities keep out of the generated domain, in one line (None: nothing):
    the report says it first, so a pass is read for what was exercised."""
    from swafloor.reference import LifeCycleKind

    parts = [text for text, on in (
        ("no sinks", not caps.sinks),
        ("no SSM", LifeCycleKind.SSM not in caps.layer_kinds),
        ("no full attention", LifeCycleKind.FULL not in caps.layer_kinds),
        ("one pool group", caps.one_pool_group),
        ("no shared pool groups", not caps.shared_pool_groups),
        ("no capacity cuts", not caps.capacity_cuts),
        ("no reused history", not caps.reused_history),
        (f"block sizes {', '.join(map(str, caps.tokens_per_block))} only", bool(caps.tokens_per_block)),
    ) if on]
    return "domain: " + ", ".join(parts) if parts else None


def _settings(examples: int, steps: int, shrink: bool, database: Any = None, search: bool = True) -> settings:
    phases = ([Phase.reuse] if database is not None else []) + ([Phase.explicit, Phase.generate] if search else [])
    phases += [Phase.shrink] if shrink else []
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        database=database,
        deadline=None,
        derandomize=False,
        phases=phases,
        report_multiple_bugs=False,
        print_blob=False,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )


def trace_path(out_dir: Path, trace: Trace, seed: int) -> Path:
    """Where a campaign saves the trace of its failure: named by backend, seed and a digest of the trace."""
    digest = hashlib.sha256(json.dumps(to_dict(trace), sort_keys=True).encode()).hexdigest()[:10]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", trace.backend or "backend").strip("-")
    return out_dir / f"{stem}-seed{seed}-{digest}.json"


def run_campaign(
    backend: str | BackendRecord,
    against: str | BackendRecord = "reference",
    *,
    profile: str = "ci",
    examples: int | None = None,
    steps: int | None = None,
    seed: int | None = None,
    shrink: bool = True,
    out_dir: Path | str | None = DEFAULT_OUT,
    progress: Callable[[Stats], None] | None = None,
    database: Any = None,
    import_seconds: float = 0.0,
    search: bool = True,
    known_classes: frozenset[str] = frozenset(),
    tokens_per_block: tuple[int, ...] | None = None,
) -> CampaignResult:
    """Fuzz ``backend`` against ``against``. A divergence is shrunk (unless ``shrink`` is False) and,
    when ``out_dir`` is not None, saved there as a JSON trace.

    ``database``: a Hypothesis example database (e.g. a directory shared by workers): the failures
    saved there for this backend and side compared against are replayed first, and a failure found
    is saved there. ``search=False`` only replays what the database holds. ``import_seconds``: time a
    caller already spent resolving and preparing the backends (added to the reported import time).
    Each side's ``prepare()`` (slow imports) runs here before the campaign, timed apart.
    ``known_classes``: divergence classes (:attr:`Divergence.class_key`) already reported: an example
    meeting one ends there and is counted in ``masked`` (:func:`swafloor.fuzz.classes.run_classes`).
    ``tokens_per_block``: the block sizes configs draw from, in place of the profile's (e.g. one page size
    of the ``pages`` profile)."""
    if profile not in PROFILES:
        raise CampaignError(f"profile={profile!r}: must be one of {sorted(PROFILES)}")
    chosen = PROFILES[profile]
    import_started = time.perf_counter()
    backend_ = backend if isinstance(backend, BackendRecord) else resolve(backend, "backend")
    against_ = against if isinstance(against, BackendRecord) else resolve(against, "against")
    for side in (backend_, against_):
        try:
            side.run_prepare()
        except SwafloorError as exc:
            raise CampaignError(f"backend={side.name!r}: cannot be prepared: {exc}") from exc
    import_seconds += time.perf_counter() - import_started  # plus what the caller spent before
    backend_name = backend_.display_name
    against_name = against_.display_name
    examples = chosen.examples if examples is None else examples
    steps = chosen.steps if steps is None else steps
    if seed is None:
        seed = chosen.seed if chosen.seed is not None else random.SystemRandom().randrange(2**32)
    stats = Stats(on_example=progress, known_classes=frozenset(known_classes))
    machine = hypothesis_seed(seed)(build_machine(
        backend_, against_, stats, chosen.batch_rounds, tokens_per_block or chosen.tokens_per_block))
    # The example database key: one per pair of sides (the machine's source is the same for all).
    machine._hypothesis_internal_add_digest = f"swafloor:{backend_.name}|{against_.name}".encode()
    divergence, trace, path = None, None, None
    try:
        with source_blind():  # the seed alone decides the examples, not the project's literals
            run_state_machine_as_test(machine, settings=_settings(examples, steps, shrink, database, search))
    except DivergenceFound as found:
        divergence, trace = found.divergence, found.trace
        if shrink:  # Hypothesis has shrunk the run; drop the steps it could not
            trace, divergence = reduce_trace(trace, backend_, against_, divergence)
        trace = attrs.evolve(
            trace,
            divergence=divergence.to_dict(),
            found={"seed": seed, "profile": chosen.name, "examples": stats.first_failure_example},
        )
        if out_dir is not None:
            path = save(trace, trace_path(Path(out_dir), trace, seed))
    except Unsatisfiable:
        if not stats.known_classes:
            raise CampaignError(f"backend={backend_.name!r}: the campaign could not run: no example was valid")
        # every example left ended in a class already reported: nothing new to find with this seed
    except HypothesisException as exc:
        raise CampaignError(f"backend={backend_.name!r}: the campaign could not run: {type(exc).__name__}: {exc}") from exc
    lost, lost_path = None, None
    if stats.first_lost_hit is not None:  # a finding apart from divergences: its trace is kept too
        lost = {k: v for k, v in stats.first_lost_hit.items() if k != "trace"}
        if out_dir is not None:
            lost_trace = attrs.evolve(stats.first_lost_hit["trace"], found={"seed": seed, "profile": chosen.name,
                                                                            "examples": lost["example"]})
            lost_path = save(lost_trace, Path(out_dir) / f"{backend_.name}-seed{seed}-lost-hit.json")
    return CampaignResult(
        backend=backend_name,
        against=against_name,
        profile=chosen.name,
        seed=seed,
        examples=stats.examples,
        runs=stats.runs,
        steps=stats.steps,
        seconds=time.perf_counter() - stats.started,
        divergence=divergence,
        trace=trace,
        trace_file=path,
        first_failure_example=stats.first_failure_example,
        first_failure_seconds=stats.first_failure_seconds,
        backend_spec=backend_.name,
        unsupported=stats.unsupported,
        served=stats.served,
        served_swa=stats.served_swa,
        served_semantics=stats.served_semantics,
        created_sharing=stats.created_sharing,
        on_prefix=stats.on_prefix,
        hits=stats.hits,
        lost_hits=stats.lost_hits,
        lost_hits_by_rule=dict(stats.lost_hits_by_rule),
        requests=stats.requests,
        retired=stats.retired,
        retire_limited=retire_limited(backend_.capabilities),
        first_lost_hit=lost,
        lost_hit_file=lost_path,
        import_seconds=import_seconds,
        backend_seconds=stats.backend_seconds,
        reference_seconds=stats.reference_seconds,
        domain=domain_of(backend_.capabilities),
        masked=dict(sorted(stats.masked.items())),
    )


def _fit_line(result: CampaignResult) -> str:
    def rate(seconds: float) -> str:
        value = result.steps_per_second(seconds)
        return "-" if value is None else f"{value:,.0f}"

    fit = "on target" if result.on_target else "OFF TARGET"
    lost = result.first_lost_hit
    return (
        f"  generator fit: {result.discard_rate:.1%} of examples discarded as unsupported "
        f"({result.unsupported} of {result.unsupported + result.served}; target <= {MAX_DISCARD_RATE:.0%}), "
        f"{result.swa_share:.1%} of served examples with an SWA life cycle (target >= {MIN_SWA_SHARE:.0%}), "
        f"{result.semantics_share:.1%} with non-default semantics"
        + (f", {result.hit_rate:.1%} of {result.created_sharing} requests created under prefix sharing hit "
           f"a shared block (target >= {MIN_HIT_RATE:.0%}{'' if result.hits_on_target else ', BELOW'}; "
           f"{result.hits / result.on_prefix if result.on_prefix else 0:.1%} of the {result.on_prefix} created on a prefix)"
           if result.created_sharing else "")
        + f": {fit}\n"
        + (f"  lost hits: {result.lost_hits} first resumes took a valid hit shorter than the longest (the engine "
           f"recomputes what it could reuse; not a divergence), per rule: "
           + ", ".join(f"{rule} {n}" for rule, n in sorted(result.lost_hits_by_rule.items()))
           + f"; the first at example {lost['example']}, step "
           f"{lost['step_index']}: resume({lost['request']!r}) took {lost['taken']} of {lost['longest']} tokens "
           f"({lost['rule']})"
           + (f"; replay: {replay_command(str(result.lost_hit_file), result.backend_spec or result.backend, result.against)}"
              if result.lost_hit_file is not None else "") + "\n"
           if lost is not None else "")
        + f"  retired: {result.retired} of {result.requests} requests ({result.retired_share:.1%}"
        + (f"; limit {MAX_RETIRED_SHARE:.0%}{', ABOVE: the campaign fails' if result.too_many_retired else ''}"
           if result.retire_limited else "")
        + "): served by the backend where the reference ran out, closed on both sides, not compared after\n"
        + f"  time: import {result.import_seconds:.1f} s (not in the campaign's); steps/s: "
        f"{result.backend} {rate(result.backend_seconds)}, {result.against} {rate(result.reference_seconds)}"
    )


def format_report(result: CampaignResult) -> str:
    """The human report: pass, or the divergence with the whole input and the replay command."""
    where = f"profile {result.profile}, seed {result.seed}"
    if result.divergence is None:
        head = (
            f"{result.backend} vs {result.against}: {result.result}: {result.examples} examples ({result.runs} runs), "
            f"{result.steps} steps, {result.seconds:.1f} s ({where})"
        )
    else:
        found_after = result.first_failure_seconds or 0.0
        head = (
            f"{result.backend} vs {result.against}: divergence found at example {result.first_failure_example} "
            f"after {found_after:.1f} s, shrunk in {result.seconds - found_after:.1f} s "
            f"({result.runs} runs in all; {where})"
        )
    if result.domain is not None:
        head = f"{result.domain}\n{head}"
    head += "\n" + _fit_line(result)
    if result.divergence is None or result.trace is None:
        return head
    lines = [head, "", result.divergence.describe(), "", "config:", "  " + json.dumps(result.trace.config.to_dict())]
    lines.append(f"trace ({len(result.trace.steps)} steps):")
    for i, step in enumerate(result.trace.steps):
        lines.append(f"  {i:3d}  {step.describe()}")
    if result.trace_file is not None:
        lines += ["", f"saved: {result.trace_file}", f"replay: {result.replay}"]
    return "\n".join(lines)
