"""``swafloor fuzz``: differential fuzzing of a backend against the reference.

Exit 0 when no divergence was found, 1 on a divergence (the whole input, the saved trace and the
replay command are printed), 2 on bad arguments (an unknown backend, a factory that cannot load).
Progress goes to stderr.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ._common import int_in, print_json, writable_dir


def register(subparsers) -> None:
    p = subparsers.add_parser("fuzz", help="fuzz a backend against the reference (differential testing)")
    p.add_argument("--backend", metavar="NAME|MODULE:FACTORY",
                   help="a registered backend (reference, oracle, mutant:...) or MODULE:FACTORY")
    p.add_argument("--against", default="reference", metavar="NAME|MODULE:FACTORY",
                   help="what to compare with (default: reference)")
    p.add_argument("--mutate-reference", metavar="NAME", default=None,
                   help="compare with a seeded bug of the reference (reference-mutant:NAME; --list shows them) "
                        "instead of the reference; --backend defaults to oracle. A divergence (exit 1) is the "
                        "expected result")
    p.add_argument("--profile", choices=("standard", "ci", "nightly", "pages"), default="standard",
                   help="standard: fixed seed, long runs of batched decoding (default); ci: fixed seed, the "
                        "shorter runs CI's tests use; nightly: random seed, long; pages: fixed seed, block sizes 64 and 256 "
                        "only (large pages: SGLang's page sizes)")
    p.add_argument("--examples", type=int_in(1, 10**15), default=None, help="examples to run (default: the profile's)")
    p.add_argument("--steps", type=int_in(1, 100_000), default=None, help="rules per example (default: the profile's)")
    p.add_argument("--seed", type=int_in(0, 2**64 - 1), default=None, help="seed (default: 0, nightly random)")
    p.add_argument("--no-shrink", action="store_true", help="report the first divergence without shrinking it")
    p.add_argument("--classes", type=int_in(1, 100), default=1, metavar="N",
                   help="report up to N divergence classes (part and operation), not only the first: after each, "
                        "the campaign runs again from its seed with the classes found ending their examples "
                        "(default 1: stop at the first divergence)")
    p.add_argument("--out", type=writable_dir, default=Path("fuzz-failures"), metavar="DIR", help="where traces go (default ./fuzz-failures)")
    p.add_argument("--workers", type=int_in(1, 1024), default=None, metavar="N",
                   help="N processes (seeds SEED..SEED+N-1, --examples split between them) sharing one "
                        "example database; one summary at the end")
    p.add_argument("--db", type=writable_dir, default=None, metavar="DIR",
                   help="the Hypothesis example database directory: its failures replay first, found ones "
                        "are saved there (default with --workers: ./.swafloor-db; without: none)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="where a dataplane:NAME backend keeps its paged KV tensors (default: $SWAFLOOR_DEVICE, "
                        "else auto: CUDA when torch sees it)")
    p.add_argument("--trtllm-source", default=None, metavar="PATH",
                   help="the trtllm-v2 backend's KVCacheManagerV2 source: a Python-era kv_cache_manager_v2 "
                        "folder or a checkout holding one (default: $SWAFLOOR_TRTLLM_SOURCE)")
    p.add_argument("--list", action="store_true", help="list the registered backends and exit")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def _progress(every: int):
    last = [0.0]

    def report(stats) -> None:
        report.last = stats  # for the summary when the user stops the campaign
        now = time.perf_counter()
        if stats.runs == 1 or now - last[0] >= every:
            last[0] = now
            state = "shrinking" if stats.first_failure_example is not None else "searching"
            print(f"fuzz: {state}: {stats.examples} examples, {stats.steps} steps, "
                  f"{now - stats.started:.1f} s", file=sys.stderr)

    report.last = None
    return report


def _run_workers(args) -> int:
    from swafloor.fuzz.workers import (
        DEFAULT_DB, WorkersError, WorkersInterrupted, format_progress, format_workers, run_workers,
    )

    from ..cli import UsageError

    def progress(merged) -> None:
        print(format_progress(merged), file=sys.stderr)

    try:
        result = run_workers(
            args.backend, args.against, workers=args.workers, profile=args.profile, examples=args.examples,
            steps=args.steps, seed=args.seed, shrink=not args.no_shrink, out_dir=args.out,
            database=args.db if args.db is not None else DEFAULT_DB, progress=progress,
        )
    except WorkersError as exc:
        if str(exc).startswith(("examples=", "workers=")):
            raise UsageError(f"swafloor fuzz: {exc}") from None
        raise
    except WorkersInterrupted as stop:  # Ctrl-C: every worker is stopped; say what they had done
        p = stop.progress
        found = ("a divergence was found (rerun the same command: the database replays it first)" if p.found
                 else "no divergence so far")
        print(f"fuzz: interrupted: {p.workers} workers, {p.examples:,} examples, {p.steps:,} steps in "
              f"{p.seconds:.1f} s ({p.steps_per_second:,.0f} steps/s); {found}", file=sys.stderr)
        return 130
    print(f"fuzz: {result.result}: {len(result.workers)} workers, {result.examples} examples, {result.steps} steps "
          f"in {result.seconds:.1f} s ({result.steps / max(result.seconds, 1e-9):,.0f} steps/s)", file=sys.stderr)
    return _print_result(args, result, format_workers)


def run(args) -> int:
    from swafloor.fuzz.backends import REGISTRY, check_factory, resolve
    from swafloor.fuzz.runner import MAX_RETIRED_SHARE, format_report, run_campaign

    if args.list:
        from swafloor.fuzz.backends.reference_mutants import names as reference_mutants

        if args.json:
            print_json({"backends": list(REGISTRY), "reference_mutants": list(reference_mutants())})
        else:
            print("\n".join((*REGISTRY, *reference_mutants())))
        return 0
    if args.mutate_reference is not None:
        from ..cli import UsageError
        from swafloor.fuzz.reference_mutants import PREFIX

        if args.against != "reference":
            raise UsageError("swafloor fuzz: --mutate-reference replaces --against; give one of them")
        name = args.mutate_reference
        args.against = name if name.startswith(PREFIX) else PREFIX + name
        if args.backend is None:
            from swafloor.fuzz.backends.reference_mutants import REFERENCE_MUTANTS

            known = REFERENCE_MUTANTS.get(args.against[len(PREFIX):])
            args.backend = known.backend if known is not None else "oracle"
    if args.backend is None:
        from ..cli import UsageError

        raise UsageError("swafloor fuzz: the following arguments are required: --backend")
    if args.classes > 1 and (args.workers is not None or args.db is not None):
        from ..cli import UsageError

        raise UsageError("swafloor fuzz: --classes runs one process without a database: drop --workers/--db")
    if args.device is not None:
        if not any(name.startswith("dataplane:") for name in (args.backend, args.against)):
            from ..cli import UsageError

            raise UsageError("swafloor fuzz: --device applies to dataplane:NAME backends only")
        os.environ["SWAFLOOR_DEVICE"] = args.device  # read when resolving, here and in --workers processes
    uses_v2 = any(name in ("trtllm-v2", "trtllm-v2-reference-quota") for name in (args.backend, args.against))
    if args.trtllm_source is not None:
        from ..cli import UsageError

        if not uses_v2:
            raise UsageError("swafloor fuzz: --trtllm-source applies to the trtllm-v2 backend only")
        if not Path(args.trtllm_source).expanduser().is_dir():
            raise UsageError(f"swafloor fuzz: --trtllm-source={args.trtllm_source!r}: not a directory")
        from swafloor.fuzz.engines.trtllm.v2 import SOURCE_ENV

        os.environ[SOURCE_ENV] = str(Path(args.trtllm_source).expanduser().resolve())  # read when building
    if uses_v2 and not os.environ.get("SWAFLOOR_TRTLLM_SOURCE"):
        from ..cli import UsageError

        raise UsageError("swafloor fuzz: the trtllm-v2 backend needs --trtllm-source PATH (or $SWAFLOOR_TRTLLM_SOURCE)")
    import_started = time.perf_counter()
    backend = resolve(args.backend, "--backend")
    against = resolve(args.against, "--against")
    for side in (backend, against):  # a spec naming no backend factory: one line, before any progress
        try:
            side.run_prepare()  # slow imports, timed apart from the campaign
        except Exception:  # noqa: BLE001 - the campaign reports a backend that cannot be prepared
            pass
        check_factory(side)
    import_seconds = time.perf_counter() - import_started
    print(f"fuzz: {backend.name} vs {against.name} ({backend.capabilities.describe()})", file=sys.stderr)
    if args.workers is not None:
        return _run_workers(args)
    database = None
    if args.db is not None:
        from hypothesis.database import DirectoryBasedExampleDatabase

        database = DirectoryBasedExampleDatabase(str(args.db))
    progress = _progress(5)
    if args.classes > 1:
        return _run_classes(args, backend, against, progress, import_seconds)
    try:
        result = run_campaign(
            backend,
            against,
            profile=args.profile,
            examples=args.examples,
            steps=args.steps,
            seed=args.seed,
            shrink=not args.no_shrink,
            out_dir=args.out,
            progress=progress,
            database=database,
            import_seconds=import_seconds,
        )
    except KeyboardInterrupt:  # Ctrl-C: long work the user asked for; say what was done
        stats = progress.last
        done = "no example finished" if stats is None else (
            f"{stats.examples:,} examples, {stats.steps:,} steps in {time.perf_counter() - stats.started:.1f} s")
        found = "" if stats is None or stats.first_failure_example is None else (
            f"; a divergence was found at example {stats.first_failure_example} (rerun with the same seed to shrink it)")
        print(f"fuzz: interrupted after {done}{found or '; no divergence so far'}", file=sys.stderr)
        return 130
    if result.divergence is None:
        print(f"fuzz: {result.result} after {result.examples} examples in {result.seconds:.1f} s "
              f"(+ {result.import_seconds:.1f} s importing the backend; {result.discard_rate:.1%} discarded, "
              f"{result.swa_share:.1%} with SWA, {result.semantics_share:.1%} with non-default semantics; "
              f"{result.retired} of {result.requests} requests retired)", file=sys.stderr)
        if result.too_many_retired:
            print(f"fuzz: fails: {result.retired_share:.1%} of the requests were retired (served by the backend "
                  f"where the reference ran out, then left out of all later comparison); the limit is "
                  f"{MAX_RETIRED_SHARE:.0%}", file=sys.stderr)
    else:  # the same example number as the report on stdout; the rest were spent shrinking
        print(f"fuzz: divergence found at example {result.first_failure_example}; {result.examples} examples "
              f"in all, shrinking included, in {result.seconds:.1f} s", file=sys.stderr)
    return _print_result(args, result, format_report)


def _run_classes(args, backend, against, progress, import_seconds: float) -> int:
    from swafloor.fuzz.classes import format_classes, run_classes

    def found(result) -> None:
        again = "; running again without it" if len(classes) + 1 < args.classes else ""
        print(f"fuzz: class {len(classes) + 1}: {result.divergence.class_key} at example "
              f"{result.first_failure_example}{again}", file=sys.stderr)
        classes.append(result)

    classes: list = []
    try:
        result = run_classes(backend, against, limit=args.classes, on_class=found, profile=args.profile,
                             examples=args.examples, steps=args.steps, seed=args.seed, shrink=not args.no_shrink,
                             out_dir=args.out, progress=progress, import_seconds=import_seconds)
    except KeyboardInterrupt:
        print(f"fuzz: interrupted after {len(classes)} divergence classes"
              + "".join(f"; {r.divergence.class_key}: {r.trace_file}" for r in classes), file=sys.stderr)
        return 130
    print(f"fuzz: {len(result.found)} divergence classes" + (" (the limit: more may remain)" if result.limited else "")
          + f" in {result.seconds:.1f} s; the last run: {result.last.examples} examples", file=sys.stderr)
    return _print_result(args, result, format_classes)


def _print_result(args, result, formatted) -> int:
    """A campaign's result on stdout (JSON with ``--json``, else ``formatted(result)``); the exit status:
    0 on a pass, else 1."""
    if args.json:
        print_json(result.to_dict())
    else:
        print(formatted(result))
    return 0 if result.result == "pass" else 1
