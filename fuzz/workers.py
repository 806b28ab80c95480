"""A campaign on several cores: N worker processes, each a campaign with its own seed, sharing one
Hypothesis example database (a directory), and one summary at the end.

- Seeds: worker ``i`` runs seed ``seed + i``; the examples are split between the workers (the total
  is the ``examples`` asked for).
- The database: each worker has a private directory (no two Hypothesis engines ever use one at the
  same time). Worker 0's starts as a copy of the shared database, and when that holds anything,
  worker 0 first replays it (and shrinks what still fails) alone, before any worker searches: while
  a second engine searched beside that replay, Hypothesis now and then reported flaky data generation
  in it (about once in 20 runs of tests/test_workers.py). The others start empty.
  When a worker finds a divergence, it alone shrinks it and saves its trace; every other worker
  still running stops searching and, once the finder is done, copies the finder's directory into its
  own and replays it (``replayed`` in its summary). At the end (and on Ctrl-C) every private
  directory is merged into the shared one, so the next run's worker 0 finds a saved failure at once.
- Progress: workers report their counts to the parent about once a second; the parent calls
  ``progress`` with the merged counts (examples and steps per second across workers).
- Workers are started with ``spawn`` (a backend may hold a GPU or threads that do not survive a
  fork), so backends are named (a registered name or ``MODULE:FACTORY``), not passed as objects.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import attrs

from swafloor.reference import SwafloorError

from .retired import RetiredVerdict

__all__ = [
    "DEFAULT_DB", "WorkerSummary", "WorkersResult", "Progress", "WorkersError", "WorkersInterrupted", "run_workers",
    "format_workers",
]

DEFAULT_DB = Path(".swafloor-db")
REPORT_EVERY = 1.0  # seconds between a worker's progress messages


class WorkersError(SwafloorError):
    """A worker could not run (its backend failed to resolve, it crashed, or it died)."""


class WorkersInterrupted(KeyboardInterrupt):
    """Ctrl-C in the parent: every worker was stopped. ``progress`` is what they had done by then
    (examples, runs and steps reported so far); the shared database keeps every failure they saved."""

    def __init__(self, progress: "Progress"):
        super().__init__("interrupted")
        self.progress = progress


class _Stopped(KeyboardInterrupt):
    """Raised inside a worker's campaign (between runs) when another worker found a divergence.
    A KeyboardInterrupt, the one exception Hypothesis lets through cleanly (any other is taken for a
    failure of the run, which then does not replay the same way)."""


@attrs.frozen
class WorkerSummary:
    """What one worker did."""

    index: int
    seed: int
    examples: int
    runs: int
    steps: int
    seconds: float
    result: str  # "pass", "divergence", or "stopped" (another worker found one first)
    replayed: bool | None = None  # when stopped: whether replaying the database diverged too
    lost_hits: int = 0  # first resumes that took a valid hit shorter than the longest (Capabilities.lost_hit_rules)
    lost_hits_by_rule: dict = attrs.field(factory=dict)  # lost-hit rule name -> lost hits it explains
    requests: int = 0  # requests created
    retired: int = 0  # of those, retired after an accepted outcome slack (runner.MAX_RETIRED_SHARE)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Progress:
    """Merged counts across workers, as the parent last heard them."""

    workers: int
    running: int
    examples: int
    runs: int
    steps: int
    seconds: float
    found: bool  # some worker has found a divergence (it is shrinking it, the others replay it)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def examples_per_second(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0


@attrs.frozen
class WorkersResult(RetiredVerdict):
    """The summary of a multi-process campaign: merged counts, and the first divergence found (its
    worker's whole campaign result, with the report, the trace and where it was saved)."""

    backend: str
    against: str
    profile: str
    database: str
    workers: tuple[WorkerSummary, ...]
    seconds: float  # wall time, start-up of the workers included
    first: Any = None  # the CampaignResult of the worker that found the first divergence
    first_worker: int | None = None
    retire_limited: bool = False  # one-sided outcome: above runner.MAX_RETIRED_SHARE retired fails

    def _total(self, count: str) -> int:
        return sum(getattr(w, count) for w in self.workers)

    retired = property(lambda self: self._total("retired"))
    requests = property(lambda self: self._total("requests"))
    examples = property(lambda self: self._total("examples"))
    runs = property(lambda self: self._total("runs"))
    steps = property(lambda self: self._total("steps"))

    @property
    def diverged(self) -> bool:
        return self.first is not None

    @property
    def divergence(self):
        return None if self.first is None else self.first.divergence

    def to_dict(self) -> dict[str, Any]:
        from .runner import summary_dict

        extra: dict[str, Any] = {
            "database": self.database,
            "workers": len(self.workers),
            "seeds": [w.seed for w in self.workers],
            "per_worker": [w.to_dict() for w in self.workers],
            **({"lost_hits": sum(w.lost_hits for w in self.workers),
                "lost_hits_by_rule": {rule: sum(w.lost_hits_by_rule.get(rule, 0) for w in self.workers)
                                      for rule in sorted({r for w in self.workers for r in w.lost_hits_by_rule})}}
               if any(w.lost_hits for w in self.workers) else {}),
            "requests": self.requests,
            "retired": self.retired,
        }
        if self.first is not None:
            extra["first_worker"] = self.first_worker
            extra["replayed_in"] = sum(1 for w in self.workers if w.replayed)
        return summary_dict(self.result, self.backend, self.against, self.profile, self.examples, self.runs,
                            self.steps, self.seconds, self.first, extra)


@attrs.frozen
class _Job:
    index: int
    backend: str
    against: str
    profile: str
    examples: int
    steps: int | None
    seed: int
    shrink: bool
    out_dir: str | None
    database: str  # this worker's private directory
    private: tuple[str, ...]  # every worker's private directory, by index
    replay_first: bool  # worker 0 replays the saved failures before any worker searches


def _merge(source: Path, target: Path) -> None:
    """Copy every entry of one example-database directory into another (entries are files named by
    their content's hash, so copying is a union)."""
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _worker(job: _Job, messages: Any, leader: Any, leader_done: Any, replayed: Any) -> None:
    """One worker process: a campaign, then (when stopped for another's divergence) a replay."""
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the parent owns stdout (--json)
    # Ctrl-C reaches the whole process group: the parent stops the workers and reports; a worker that
    # took the SIGINT itself could print a traceback from wherever it landed (a gc callback once).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from hypothesis.database import DirectoryBasedExampleDatabase

        from .runner import run_campaign

        database = DirectoryBasedExampleDatabase(job.database)  # private: no other engine uses it
        started = time.perf_counter()
        seen: dict[str, Any] = {"last": 0.0, "stats": None, "found": False, "stopped": False}

        def progress(stats: Any) -> None:
            seen["stats"] = stats
            if stats.first_failure_example is not None and not seen["found"]:
                seen["found"] = True
                with leader.get_lock():  # the first worker to find a divergence shrinks it
                    if leader.value < 0:
                        leader.value = job.index
            if leader.value >= 0 and leader.value != job.index and not seen["stopped"]:
                # Once only: a worker interrupted while shrinking its own failure has Hypothesis
                # run that failure once more to report it, and that run must go through.
                seen["stopped"] = True
                raise _Stopped
            now = time.perf_counter()
            if now - seen["last"] >= REPORT_EVERY:
                seen["last"] = now
                messages.put(("progress", job.index, stats.runs, stats.examples, stats.steps))

        kwargs = dict(profile=job.profile, steps=job.steps, seed=job.seed)
        result = None
        try:
            if job.index == 0:
                if job.replay_first:  # the saved failures, alone: no other engine runs meanwhile
                    first = run_campaign(job.backend, job.against, examples=job.examples, shrink=job.shrink,
                                         out_dir=None, database=database, search=False, **kwargs)
                    if first.divergence is not None:
                        with leader.get_lock():
                            if leader.value < 0:
                                leader.value = job.index
                        result = first
                replayed.set()
            else:
                replayed.wait()
            if result is None:
                result = run_campaign(job.backend, job.against, examples=job.examples, shrink=job.shrink,
                                      out_dir=None, progress=progress, database=database, **kwargs)
        except _Stopped:
            result = None
        if seen["stopped"]:
            stats = seen["stats"]
            # Replay once the finder has shrunk and saved its failure (Hypothesis engines shrinking and
            # replaying one database key at the same time can disagree on a run).
            while not leader_done.wait(0.5):
                pass
            _merge(Path(job.private[leader.value]), Path(job.database))  # the finder's, now complete
            replay = run_campaign(job.backend, job.against, examples=1, shrink=False, out_dir=None,
                                  search=False, database=database, **kwargs)
            summary = WorkerSummary(job.index, job.seed, stats.examples, stats.runs, stats.steps + replay.steps,
                                    time.perf_counter() - started, "stopped", replay.divergence is not None,
                                    stats.lost_hits, dict(stats.lost_hits_by_rule), stats.requests, stats.retired)
            messages.put(("done", job.index, summary, None))
            return
        assert result is not None
        if result.trace is not None and job.out_dir is not None:  # only the finder saves its trace
            from .runner import trace_path
            from .trace import save

            result = attrs.evolve(result, trace_file=save(result.trace, trace_path(Path(job.out_dir), result.trace, job.seed)))
        summary = WorkerSummary(job.index, job.seed, result.examples, result.runs, result.steps,
                                time.perf_counter() - started, result.result, lost_hits=result.lost_hits,
                                lost_hits_by_rule=dict(result.lost_hits_by_rule),
                                requests=result.requests, retired=result.retired)
        messages.put(("done", job.index, summary, result if result.divergence is not None else None))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises WorkersError
        import traceback

        where = "\n" + "".join(traceback.format_exception(exc)) if os.environ.get("SWAFLOOR_DEBUG") else ""
        messages.put(("error", job.index, f"{type(exc).__name__}: {exc}{where}"))


def run_workers(
    backend: str,
    against: str = "reference",
    *,
    workers: int = 2,
    profile: str = "ci",
    examples: int | None = None,
    steps: int | None = None,
    seed: int | None = None,
    shrink: bool = True,
    out_dir: Path | str | None = "fuzz-failures",
    database: Path | str = DEFAULT_DB,
    progress: Callable[[Progress], None] | None = None,
    progress_every: float = 5.0,
) -> WorkersResult:
    """Run ``workers`` campaigns of ``backend`` against ``against`` in parallel processes sharing the
    example database directory ``database``; ``examples`` is the total (the profile's by default)."""
    from .backends import resolve
    from .runner import PROFILES, CampaignError

    if profile not in PROFILES:
        raise CampaignError(f"profile={profile!r}: must be one of {sorted(PROFILES)}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise WorkersError(f"workers={workers!r}: must be an integer >= 1")
    for spec, field in ((backend, "backend"), (against, "against")):
        if not isinstance(spec, str):
            raise WorkersError(f"{field}={type(spec).__name__}: workers need a backend name or MODULE:FACTORY")
        resolve(spec, field)  # fail here, with one message, rather than in every worker
    chosen = PROFILES[profile]
    total = chosen.examples if examples is None else examples
    if total < workers:
        raise WorkersError(f"examples={total}: fewer than workers={workers}")
    if seed is None:
        seed = chosen.seed if chosen.seed is not None else random.SystemRandom().randrange(2**32)
    database = Path(database)
    database.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="swafloor-workers-"))
    private = tuple(str(scratch / f"worker{i}") for i in range(workers))
    _merge(database, Path(private[0]))  # worker 0 replays the saved failures first
    saved = any(p.is_file() for p in database.rglob("*"))
    jobs = [
        _Job(i, backend, against, profile, share, steps, seed + i, shrink,
             None if out_dir is None else str(out_dir), private[i], private, saved)
        for i, share in enumerate(_split(total, workers))
    ]

    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    leader = context.Value("i", -1)
    leader_done = context.Event()
    replayed = context.Event()  # worker 0 has replayed the saved failures: the others may search
    started = time.perf_counter()
    processes = [context.Process(target=_worker, args=(job, messages, leader, leader_done, replayed), daemon=True) for job in jobs]
    for process in processes:
        process.start()

    counts = {job.index: (0, 0, 0) for job in jobs}
    done: dict[int, WorkerSummary] = {}
    found: dict[int, Any] = {}
    errors: list[str] = []
    last_report = started
    interrupted = False
    try:
        while len(done) + len(errors) < workers:
            try:
                message = messages.get(timeout=0.2)
            except queue_module.Empty:
                message = None
                dead = [job.index for job, p in zip(jobs, processes)
                        if not p.is_alive() and job.index not in done and p.exitcode not in (None, 0)]
                if dead and messages.empty():
                    errors += [f"worker {i} died (exit code {processes[i].exitcode})" for i in dead]
                    break
            if message is not None:
                kind, index = message[0], message[1]
                if kind == "progress":
                    counts[index] = message[2:5]
                elif kind == "done":
                    summary, result = message[2], message[3]
                    done[index] = summary
                    if index == leader.value:
                        leader_done.set()
                    counts[index] = (summary.runs, summary.examples, summary.steps)
                    if result is not None:
                        found[index] = result
                        with leader.get_lock():
                            if leader.value < 0:
                                leader.value = index
                elif kind == "error":
                    errors.append(f"worker {index}: {message[2]}")
                    leader_done.set()  # nobody waits for a finder that failed
                    replayed.set()  # ... nor for worker 0's replay
            now = time.perf_counter()
            if progress is not None and now - last_report >= progress_every:
                last_report = now
                progress(_merged(counts, workers, workers - len(done), now - started, leader.value >= 0))
    except KeyboardInterrupt:  # Ctrl-C: stop every worker, then say what they had done
        interrupted = True
    finally:
        for process in processes:
            if interrupted:
                process.terminate()
            process.join(timeout=5 if not errors else 0.5)
            if process.is_alive():
                process.terminate()
                process.join()
        for path in private:  # what every worker saved, kept for the next run (Ctrl-C included)
            _merge(Path(path), database)
        shutil.rmtree(scratch, ignore_errors=True)
    if interrupted:
        raise WorkersInterrupted(_merged(counts, workers, 0, time.perf_counter() - started, leader.value >= 0))
    if errors:
        raise WorkersError("; ".join(errors))
    seconds = time.perf_counter() - started
    first_worker = leader.value if leader.value in found else (min(found) if found else None)
    return WorkersResult(
        backend=backend if first_worker is None else found[first_worker].backend,
        against=against,
        profile=chosen.name,
        database=str(database),
        workers=tuple(done[i] for i in sorted(done)),
        seconds=seconds,
        first=None if first_worker is None else found[first_worker],
        first_worker=first_worker,
        retire_limited=_retire_limited(backend),
    )


def _retire_limited(backend: str) -> bool:
    from .backends import resolve
    from .runner import retire_limited

    return retire_limited(resolve(backend, "backend").capabilities)


def _merged(counts: dict[int, tuple[int, int, int]], workers: int, running: int, seconds: float, found: bool) -> Progress:
    runs = sum(c[0] for c in counts.values())
    examples = sum(c[1] for c in counts.values())
    steps = sum(c[2] for c in counts.values())
    return Progress(workers, running, examples, runs, steps, seconds, found)


def format_progress(p: Progress) -> str:
    state = "shrinking and replaying" if p.found else "searching"
    return (
        f"fuzz: {p.workers} workers ({p.running} running): {state}: {p.examples} examples "
        f"({p.examples_per_second:,.0f}/s), {p.steps} steps ({p.steps_per_second:,.0f}/s), {p.seconds:.1f} s"
    )


def format_workers(result: WorkersResult) -> str:
    """The human summary: merged counts, each worker's line, then the first divergence's report."""
    from .runner import format_report

    rate = result.steps / result.seconds if result.seconds > 0 else 0.0
    head = (
        f"{result.backend} vs {result.against}: {result.result}: {len(result.workers)} workers, "
        f"{result.examples} examples ({result.runs} runs), {result.steps} steps, {result.retired} of "
        f"{result.requests} requests retired, {result.seconds:.1f} s, "
        f"{rate:,.0f} steps/s (profile {result.profile}; database {result.database})"
    )
    lines = [head]
    for w in result.workers:
        extra = "" if w.replayed is None else f", replayed the database: {'diverged' if w.replayed else 'no divergence'}"
        extra += f", {w.lost_hits} lost hits (not divergences)" if w.lost_hits else ""
        lines.append(f"  worker {w.index} (seed {w.seed}): {w.result}, {w.examples} examples, {w.steps} steps, "
                     f"{w.seconds:.1f} s{extra}")
    if result.first is not None:
        lines += ["", f"first divergence, worker {result.first_worker}:", format_report(result.first)]
    return "\n".join(lines)
