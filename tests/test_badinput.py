"""The bad-input campaign: generated malformed or extreme input on four surfaces, each asserted to
give a clean answer in bounded time and memory.

Surfaces and what every input must give:

- ``cli``: ``swafloor.cli.main(argv)`` returns; exit 2 prints exactly one stderr line; nothing else
  escapes. floor, explain, simulate (up to 2000 steps) and replay run for real; the other commands'
  handlers are replaced after parsing (their work is long: proofs, campaigns, benchmarks), except
  that fuzz still resolves its backend specs and builds both sides once.
- ``config``: ``Config.from_dict(data)`` returns a Config that round-trips and builds a Manager, or
  raises ConfigError with a field and a one-line message.
- ``trace``: trace files mutated from ``tests/regressions/*.json`` (values, text, nesting, numbers,
  backend names) replayed with ``swafloor replay``: exit 0 or 1, or exit 2 with one line; so are
  special files (``/dev/zero``, a folder, a FIFO no one writes to), each once. The cli surface's
  file arguments include that FIFO too.
- ``manager``: ``Manager(config, release_order)`` with bad arguments raises ConfigError naming
  which; then sequences of Manager calls with bad and extreme arguments (reused histories up to
  10**18 included): each call succeeds (then ``check()`` passes) or raises RequestError naming the
  field, leaving ``snapshot()`` (always taken: it is O(held blocks)) equal and ``check()`` passing;
  an out-of-slots Outcome also leaves the snapshot equal.

Each surface runs in a child process under a memory limit (RLIMIT_AS) with a per-input time limit
(a SIGALRM timer: an input running longer counts as a hang and fails the campaign), in a scratch
working directory. CI runs 5,400 inputs; more with ``SWAFLOOR_BADINPUT_EXAMPLES=50000``. The counts
by surface and outcome are printed by::

    python -m tests.test_badinput [--examples N] [--surface S ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import shutil
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = sorted((ROOT / "tests" / "regressions").glob("*.json"))
SURFACES = ("cli", "config", "trace", "manager")
SHARE = {"cli": 0.3, "config": 0.3, "trace": 0.2, "manager": 0.2}
DEFAULT_TOTAL = 5400
CASE_SECONDS = 20.0  # one input running longer is a hang
MEMORY_BYTES = 4 * 1024**3  # address space of each child (Python, Hypothesis, z3's library mapped)
CHILD_SECONDS = 900  # a whole surface; CI's 5,400 inputs take well under a minute each


def total_examples() -> int:
    return int(os.environ.get("SWAFLOOR_BADINPUT_EXAMPLES", DEFAULT_TOTAL))


def share_of(surface: str, total: int) -> int:
    return max(1, round(total * SHARE[surface]))


class Hang(BaseException):
    """An input ran past CASE_SECONDS (BaseException: code under test must not swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float = CASE_SECONDS):
    import signal

    def fire(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Deep(list):
    """A list nested ``depth`` deep that describes itself briefly (Hypothesis's printer recurses)."""

    def __init__(self, depth: int, leaf=0):
        value = leaf
        for _ in range(depth - 1):
            value = [value]
        super().__init__([value])
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"


def deep(depth: int, leaf=0):
    return Deep(depth, leaf)


def one_line(text: str) -> bool:
    return text.endswith("\n") and text.count("\n") == 1 and len(text.strip()) > 0 and "\r" not in text


# ----------------------------------------------------------------------------- strategies
def strategies():
    """Built lazily so that importing this module (pytest collection) stays cheap."""
    from hypothesis import strategies as st

    # (mapped, not sampled: Hypothesis describes sampled values with repr, which a 5000-digit int breaks)
    huge = st.integers(0, 8).map(lambda i: [10**18, 10**18 + 1, 2**63, 2**64, 10**30, 10**5000, -(10**5000), -1,
                                            -(2**63)][i])
    ints = st.one_of(st.integers(-3, 70), st.integers(), huge)
    floats = st.one_of(st.floats(), st.sampled_from([float("nan"), float("inf"), -0.0, 1e-9, 1e300]))
    texts = st.one_of(
        st.text(max_size=12),
        st.sampled_from(["", "a\nb", "\x00", "x" * 5000, "fixed", "legacy", "bump", "attention", "ssm", "4"]),
    )
    deeps = st.builds(deep, st.sampled_from([65, 1000, 3000]))
    atoms = st.one_of(ints, floats, texts, st.booleans(), st.none(), deeps)
    values = st.recursive(
        atoms, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=3), max_leaves=8
    )
    return st, ints, texts, values


# ----------------------------------------------------------------------------- cli
SAFE_SPECS = [
    "reference", "oracle", "mutant:legacy-floor", "mutant:floor-division", "", " ", "nonsense", ".x:y", "..a:b",
    "x:", ":y", "a b:c", "builtins:print", "builtins:len", "builtins:dict", "swafloor.reference:Manager",
    "swafloor.reference:Config", "json:dumps", "math:pi", "os:sep", "os.path:nope", "no_such_module_xyz:f",
    "swafloor.fuzz.backends.reference:reference", "swafloor.fuzz.backends.oracle:oracle", "dataplane:",
    "dataplane:no_such_backend", "a\nb:c", "x" * 300 + ":y",
]
REAL_COMMANDS = {"floor", "explain", "simulate", "replay"}
MAX_REAL_STEPS = 2000


def _value_texts(st, extra_paths=()):
    numbers = st.one_of(
        st.integers(-5, 70).map(str),
        st.integers(-(10**20), 10**20).map(str),
        st.sampled_from([
            "0", "1", "4", "-1", "1e3", "0x10", " 4", "4 ", "1_000", "\u0663", "9" * 5000, "--", "-", "", "nan",
            "inf", "-inf", "1e-9", "1e400", "0.5", "10000000000000000000", "1000000000000000000", "1000000000",
            "a\nb", "2147483648", "86400", "86401", "3600", "0.001",
        ]),
    )
    paths = st.sampled_from(
        ["/dev/zero", "/dev/null", "/dev/null/x", "/", "/nonexistent/x", "a\nb", "x" * 5000, "\x00", ".", "out"]
        + [str(p) for p in extra_paths]  # real traces as copies: an output option may overwrite its path
    )
    return st.one_of(numbers, paths, st.sampled_from(SAFE_SPECS), st.text(max_size=15))


def _options_of(parser) -> dict[str, list[tuple[str, bool]]]:
    """Per command: its option strings and whether each takes a value (read from the real parser,
    so options added later are covered too)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, p in sub.choices.items():
        opts = []
        for action in p._actions:
            if not action.option_strings or "-h" in action.option_strings:
                continue
            opts.append((action.option_strings[-1], action.nargs != 0))
        out[name] = opts
    return out


def cli_argv_strategy(commands: dict, extra_paths=()):
    st, _, _, _ = strategies()
    extra_paths = tuple(str(p) for p in extra_paths)
    values = _value_texts(st, extra_paths)
    small = st.integers(1, 40).map(str)

    @st.composite
    def argv(draw):
        name = draw(st.sampled_from(sorted(commands) + ["nonsense", ""]))
        args = [name] if name else []
        if name in ("floor", "explain", "simulate") and draw(st.booleans()):
            args += ["--window", draw(small), "--tokens-per-block", draw(small)]
        if name == "replay" and draw(st.integers(0, 3)):
            args.append(draw(st.sampled_from(extra_paths)) if extra_paths and draw(st.integers(0, 5)) == 0
                        else draw(values))
        for _ in range(draw(st.integers(0, 4))):
            choice = draw(st.integers(0, 9))
            options = commands.get(name) or [("--json", False)]
            if choice == 0:
                args.append(draw(values))  # a stray positional
            else:
                option, takes = draw(st.sampled_from(options))
                if not takes:
                    args.append(option)
                elif draw(st.integers(0, 3)) == 0:
                    args.append(f"{option}={draw(values)}")
                else:
                    args += [option, draw(values)]
        return args

    return argv()


def _guarded_parser(real_build):
    """The real parser, with handlers of long-running commands replaced after parsing."""
    from swafloor.cli import UsageError

    def stub(name):
        def handler(args):
            if name == "fuzz" and not getattr(args, "list", False):
                return _fuzz_probe(args, UsageError)
            return 0

        return handler

    def guard_simulate(original):
        def handler(args):
            steps = args.steps if args.steps is not None else 10 * args.window
            return original(args) if steps <= MAX_REAL_STEPS else 0

        return handler

    cache = []

    def build():  # built once (argparse parsers are reusable): inputs then cost parsing, not building
        if cache:
            return cache[0]
        parser = real_build()
        cache.append(parser)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for name, p in sub.choices.items():
            original = p.get_default("handler")
            if name == "simulate":
                p.set_defaults(handler=guard_simulate(original))
            elif name not in REAL_COMMANDS:
                p.set_defaults(handler=stub(name))
        return parser

    return build


def _fuzz_probe(args, UsageError):
    """What fuzz does before its campaign: resolve both specs and check each builds a backend."""
    from swafloor.fuzz.backends import check_factory, resolve

    if args.backend is None:
        raise UsageError("swafloor fuzz: the following arguments are required: --backend")
    sides = (resolve(args.backend, "--backend"), resolve(args.against, "--against"))
    with contextlib.redirect_stdout(io.StringIO()):  # builtins:print prints the config
        for side in sides:
            check_factory(side)
    return 0


def check_cli(argv: list[str], build) -> str:
    import swafloor.cli as cli

    out, err = io.StringIO(), io.StringIO()
    saved = cli.build_parser
    cli.build_parser = build
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_limit():
            code = cli.main(argv)
    except SystemExit as exc:  # only --help / --version (or an abbreviation) may exit this way
        assert exc.code == 0 and any(a.startswith("-") for a in argv), (argv, exc.code)
        return "help or version"
    finally:
        cli.build_parser = saved
    assert code in (0, 1, 2, 3, 4), (argv, code)
    if code == 2:
        assert one_line(err.getvalue()), (argv, err.getvalue()[:2000])
        assert len(err.getvalue()) <= 600, (argv, len(err.getvalue()))
        return "exit 2, one line"
    command = argv[0] if argv else ""
    return f"exit {code}" + ("" if command in REAL_COMMANDS else " (parsed; handler stubbed)")


# ----------------------------------------------------------------------------- config
def config_strategy():
    st, ints, texts, values = strategies()
    layer = st.one_of(
        st.fixed_dictionaries({"kind": st.just("attention")}, optional={
            "window": st.one_of(st.none(), st.integers(1, 64)), "sink_tokens": st.integers(0, 8)}),
        st.just({"kind": "ssm"}),
    )
    base = st.fixed_dictionaries(
        {"tokens_per_block": st.integers(1, 16), "layers": st.lists(layer, min_size=1, max_size=4)},
        optional={
            "floor_rule": st.sampled_from(["fixed", "legacy"]),
            "below_minimum": st.sampled_from(["raise", "bump"]),
            "semantics": st.fixed_dictionaries({}, optional={
                "in_flight_tokens": st.integers(0, 8), "free_stale": st.sampled_from(["at-commit", "at-allocate"]),
                "suspend": st.sampled_from(["release", "recompute", "keep"]), "first_resume_copy": st.booleans()}),
        },
    )
    keys = st.sampled_from(["tokens_per_block", "layers", "pool_groups", "slots", "floor_rule", "below_minimum",
                            "semantics", "unknown", "a\nb"])
    layer_keys = st.sampled_from(["kind", "window", "sink_tokens", "extra"])
    semantics_keys = st.sampled_from(["in_flight_tokens", "free_stale", "suspend", "first_resume_copy", "x"])

    @st.composite
    def config(draw):
        data = draw(base)
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.integers(0, 9))
            if kind == 0:
                return draw(values)  # not even an object
            if kind <= 3:
                data[draw(keys)] = draw(values)
            elif kind == 4:
                data.pop(draw(keys), None)
            elif kind in (5, 6) and isinstance(data.get("layers"), list) and data["layers"]:
                i = draw(st.integers(0, len(data["layers"]) - 1))
                if isinstance(data["layers"][i], dict):
                    data["layers"][i][draw(layer_keys)] = draw(values)
                else:
                    data["layers"][i] = draw(values)
            elif kind == 7:
                data["semantics"] = {draw(semantics_keys): draw(values)}
            elif kind == 8:
                data["slots"] = [draw(ints) for _ in range(draw(st.integers(0, 3)))]
                data["pool_groups"] = draw(st.one_of(st.none(), st.lists(ints, max_size=3)))
            else:  # many layers: distinct windows (the layout build must stay linear)
                n = draw(st.sampled_from([50] * 8 + [2000, 20000]))
                data["layers"] = [{"kind": "attention", "window": w + 1} for w in range(n)]
        return data

    return config()


def check_config(data) -> str:
    from swafloor.reference import Config, ConfigError, Manager

    with time_limit():
        try:
            config = Config.from_dict(data)
        except ConfigError as exc:
            assert isinstance(exc.field, str) and exc.field, exc.field
            message = str(exc)
            assert "\n" not in message and len(message) <= 1000, message[:2000]
            return "ConfigError"
        assert Config.from_dict(config.to_dict()) == config
        manager = Manager(config)
        manager.check()
    return "accepted"


# ----------------------------------------------------------------------------- trace
def _texts():
    return [p.read_text() for p in REGRESSIONS]


def _paths(data, prefix=()):
    yield prefix
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _paths(v, prefix + (i,))


def _set(data, path, value):
    if not path:
        return value
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


def trace_strategy():
    st, _, _, _ = strategies()
    originals = _texts()
    json_values = st.recursive(
        st.one_of(st.integers(-(10**20), 10**20), st.integers(-3, 40), st.sampled_from([10**18, 10**18 + 1, 10**12]),
                  st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8), st.booleans(), st.none(),
                  st.sampled_from(SAFE_SPECS + ["reference", "oracle", "match", "divergence", "create", "resize",
                                                "commit", "resume", "swafloor-trace/1"])),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=6,
    )

    @st.composite
    def trace(draw):
        text = draw(st.sampled_from(originals))
        data = json.loads(text)
        mode = draw(st.integers(0, 11))
        if mode <= 5:  # change values at JSON paths (steps, config, names), keep valid JSON
            for _ in range(draw(st.integers(1, 3))):
                paths = list(_paths(data))
                data = _set(data, draw(st.sampled_from(paths)), draw(json_values))
            if draw(st.booleans()) and isinstance(data, dict):  # plus real steps, small or huge numbers
                n = draw(st.sampled_from([3, 10**6, 10**12, 10**18]))
                data["steps"] = [{"op": "create", "request": "r", "reused_history": draw(st.integers(0, n))},
                                 {"op": "resume", "request": "r"},
                                 {"op": "resize", "request": "r", "capacity": draw(st.integers(0, n)),
                                  "history": draw(st.integers(0, n))},
                                 {"op": "commit", "request": "r", "tokens": draw(st.integers(0, 3))}]
            return json.dumps(data).encode()
        if mode == 6:  # a number beyond what JSON ints convert, NaN, Infinity
            token = draw(st.sampled_from(["9" * 5000, "NaN", "Infinity", "-Infinity", "1e400", "-0"]))
            return re.sub(r"\b\d+\b", token, text, count=draw(st.integers(1, 3))).encode()
        if mode == 7:  # deep nesting somewhere
            depth = draw(st.sampled_from([63, 65, 2000, 100000]))
            return text.replace('"steps": [', '"steps": [' + "[" * depth + "]" * depth + ",", 1).encode()
        if mode == 8:  # truncated
            return text[: draw(st.integers(0, len(text)))].encode()
        if mode == 9:  # bytes that are not UTF-8, or NULs
            cut = draw(st.integers(0, len(text)))
            return text[:cut].encode() + draw(st.sampled_from([b"\xff\xfe", b"\x00", b"\xc3"])) + text[cut:].encode()
        if mode == 10:  # many steps
            steps = data.get("steps") or [{"op": "resume", "request": "r0"}]
            data["steps"] = steps * draw(st.sampled_from([10, 100]))  # replay costs about 1 ms a step
            return json.dumps(data).encode()
        return draw(st.binary(max_size=64))

    return st.tuples(trace(), st.sampled_from([None, None, None, "reference", "oracle", "builtins:print", ".x:y"]),
                     st.booleans())


def check_trace(case, workdir: Path) -> str:
    import swafloor.cli as cli

    content, backend, as_json = case
    path = workdir / "case.json"
    path.write_bytes(content)
    argv = ["replay", str(path)] + (["--backend", backend] if backend else []) + (["--json"] if as_json else [])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_limit():
        code = cli.main(argv)
    assert code in (0, 1, 2), (code, err.getvalue()[:2000])
    if code == 2:
        assert one_line(err.getvalue()) and len(err.getvalue()) <= 600, err.getvalue()[:2000]
        return "exit 2, one line"
    return "replayed: match" if code == 0 else "replayed: divergence"


#: Inputs the trace campaign once found hanging (saved as found, replayed forever with the backend that
#: hung): a reused history of 26,321 tokens made the oracle's hit search quadratic (nothing cached, every
#: length's whole window listed before any lookup).
FOUND = sorted((ROOT / "tests" / "badinput").glob("trace-*.json"))


@pytest.mark.parametrize("path", FOUND, ids=[p.stem for p in FOUND])
def test_found_trace_inputs_answer(path, tmp_path):
    assert check_trace((path.read_bytes(), "oracle", False), tmp_path) in ("replayed: match", "replayed: divergence")


SPECIAL_FILES = ["/dev/zero", "/", "/nonexistent/trace.json", "a\nb.json", "\x00", ""]


# ----------------------------------------------------------------------------- manager
def manager_strategy():
    st, ints, texts, values = strategies()
    ids = st.one_of(st.sampled_from(["r0", "r1", "r2"]), st.sampled_from(["", "x" * 300, "a\nb"]),
                    values, st.just(float("nan")), st.just(("r0",)))
    small = st.integers(0, 40)
    lengths = st.one_of(small, small, ints, st.sampled_from([10**6, 10**12, 10**18]), values)
    call = st.one_of(
        st.tuples(st.just("create"), ids, lengths),
        st.tuples(st.just("resume"), ids),
        st.tuples(st.just("resize"), ids, lengths, lengths),
        st.tuples(st.just("resize"), ids, small, small),
        st.tuples(st.just("commit"), ids, lengths),
        st.tuples(st.just("suspend"), ids),
        st.tuples(st.just("close"), ids),
    )
    config = st.fixed_dictionaries({
        "t": st.integers(1, 8),
        "layers": st.lists(st.one_of(st.builds(lambda w, s: ("swa", w, s), st.integers(1, 24), st.integers(0, 6)),
                                     st.just(("full",)), st.just(("ssm",))), min_size=1, max_size=3),
        "extra": st.sampled_from([0, 0, 3, 10**9]),
        # mostly valid (the calls are the point), now and then a bad argument to Manager itself
        "order": st.tuples(st.integers(0, 19), st.sampled_from(["release-first", "hold-until-return"]), st.one_of(
            st.sampled_from(["RELEASE-FIRST", "release_first", "", None, 3, "hold-until-return "]), values),
        ).map(lambda c: c[1] if c[0] < 18 else c[2]),
        "config": st.tuples(st.integers(0, 23), values).map(lambda c: "valid" if c[0] < 23 else c[1]),
    })
    # a session that only grows: valid ids and capacities, so the pools really run out now and then
    # (arbitrary calls alone reached "out of slots" in 6 of 1,080 inputs, and in none on CI's draw)
    growth = st.lists(st.tuples(st.sampled_from(["r0", "r1", "r2"]), st.integers(1, 64)), min_size=1, max_size=12).map(
        lambda steps: [c for r in ("r0", "r1", "r2") for c in (("create", r, 0), ("resume", r))]
        + [("resize", r, n) for r, n in steps])
    return st.tuples(config, st.one_of(st.lists(call, min_size=1, max_size=25), growth))


def _fingerprint(manager):
    """The snapshot: O(held blocks) whatever the lengths (a request reusing 10**12 tokens once made
    it list 2.5 * 10**11 blocks and run out of memory)."""
    return manager.snapshot()


def check_manager(case) -> Counter:
    from swafloor.reference import (AttentionLayer, Config, ConfigError, Manager, RequestError, SsmLayer,
                                    build_layout)

    spec, calls = case
    layers = [SsmLayer() if l[0] == "ssm" else AttentionLayer(None) if l[0] == "full" else
              AttentionLayer(l[1], l[2]) for l in spec["layers"]]
    base = Config(spec["t"], layers)
    slots = [m + spec["extra"] for m in build_layout(base).min_slots]
    config = Config(spec["t"], layers, slots=slots) if spec["config"] == "valid" else spec["config"]
    seen = Counter()
    with time_limit():
        try:
            manager = Manager(config, release_order=spec["order"])
        except ConfigError as exc:  # the manager's own arguments: a typed error naming which
            assert exc.field in ("config", "release_order"), exc.field
            assert "\n" not in str(exc) and len(str(exc)) <= 1000, str(exc)[:2000]
            seen["ConfigError naming a Manager argument"] += 1
            return seen
        for name, *arguments in calls:
            before = _fingerprint(manager)
            try:
                if name == "create":
                    result = manager.create(arguments[0], reused_history=arguments[1])
                else:
                    result = getattr(manager, name)(*arguments)
            except RequestError as exc:
                assert isinstance(exc.field, str) and exc.field, exc.field
                assert "\n" not in str(exc) and len(str(exc)) <= 1000, str(exc)[:2000]
                assert _fingerprint(manager) == before, (name, arguments)
                manager.check()
                seen["RequestError, state unchanged"] += 1
                continue
            manager.check()
            if result is not None and not result:
                assert _fingerprint(manager) == before, (name, arguments)
                seen["out of slots, state unchanged"] += 1
            else:
                seen["ok"] += 1
    return seen


# ----------------------------------------------------------------------------- running a surface
def run_surface(surface: str, examples: int) -> Counter:
    """Run ``examples`` generated inputs on one surface in this process; returns outcome counts.
    Raises on the first input that breaks a rule (Hypothesis shrinks and reports it)."""
    with tempfile.TemporaryDirectory(prefix="swafloor-badinput-") as work:
        return _run_surface(surface, examples, Path(work))


def _run_surface(surface: str, examples: int, workdir: Path) -> Counter:
    from hypothesis import HealthCheck, Phase, given, settings

    counts: Counter = Counter()
    options = settings(max_examples=examples, database=None, deadline=None, derandomize=True,
                       suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink])
    fifo = workdir / "fifo.json"  # a FIFO no one writes to: opening it to read would block forever
    os.mkfifo(fifo)
    if surface == "cli":
        import swafloor.cli as cli

        build = _guarded_parser(cli.build_parser)
        commands = _options_of(cli.build_parser())
        copies = workdir / "regressions"
        copies.mkdir()
        for trace in REGRESSIONS:
            shutil.copy(trace, copies / trace.name)
        strategy = cli_argv_strategy(commands, extra_paths=(fifo, *sorted(copies.iterdir())))
        body = lambda case: counts.update([check_cli(case, build)])  # noqa: E731
    elif surface == "config":
        strategy = config_strategy()
        body = lambda case: counts.update([check_config(case)])  # noqa: E731
    elif surface == "trace":
        strategy = trace_strategy()
        body = lambda case: counts.update([check_trace(case, workdir)])  # noqa: E731
    elif surface == "manager":
        strategy = manager_strategy()
        body = lambda case: counts.update(check_manager(case))  # noqa: E731
    else:
        raise ValueError(f"surface={surface!r}: must be one of {SURFACES}")
    inputs = Counter()

    def test(case):
        inputs["inputs"] += 1
        try:
            body(case)
        except BaseException as exc:  # say what it was (a Hang is neither shrunk nor printed)
            if not inputs["failed"]:
                inputs["failed"] += 1
                print(f"first failing input ({surface}): {type(exc).__name__}: {_shown(case)}", file=sys.stderr)
            raise

    given(strategy)(settings(options)(test))()
    if surface == "trace":  # special files, each once
        import swafloor.cli as cli

        for name in SPECIAL_FILES + [str(fifo)]:
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), time_limit():
                code = cli.main(["replay", name])
            assert code == 2 and one_line(err.getvalue()), (name, code, err.getvalue()[:2000])
            counts["exit 2, one line"] += 1
            inputs["inputs"] += 1
    counts["_inputs"] = inputs["inputs"]
    return counts


def _shown(case) -> str:
    from swafloor.reference.show import bounded

    return bounded(case, 3000)


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def run_child(surface: str, examples: int) -> tuple[int, dict | None, str]:
    """Run one surface in a child process under the memory limit, in a scratch directory."""
    with tempfile.TemporaryDirectory(prefix="swafloor-badinput-cwd-") as cwd:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run(
            [sys.executable, "-m", "tests.test_badinput", "--child", surface, "--examples", str(examples)],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=CHILD_SECONDS, preexec_fn=_limit_memory,
        )
    counts = None
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            counts = json.loads(line)
            break
    return proc.returncode, counts, proc.stderr[-6000:]


def run_all(total: int, surfaces=SURFACES, workers: int = 2) -> dict[str, tuple[int, dict | None, str, float]]:
    def one(surface):
        started = time.perf_counter()
        rc, counts, err = run_child(surface, share_of(surface, total))
        return surface, (rc, counts, err, time.perf_counter() - started)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(pool.map(one, surfaces))


def format_table(results: dict) -> str:
    lines = [f"{'surface':<8} {'inputs':>7} {'seconds':>8}  outcomes"]
    total = 0
    for surface, (rc, counts, err, seconds) in results.items():
        if counts is None:
            lines.append(f"{surface:<8} {'-':>7} {seconds:>8.1f}  FAILED (exit {rc}): {err.strip().splitlines()[-1:]}")
            continue
        n = counts.pop("_inputs", 0)
        total += n
        outcome = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        lines.append(f"{surface:<8} {n:>7} {seconds:>8.1f}  {outcome}" + ("" if rc == 0 else f"  FAILED (exit {rc})"))
    lines.append(f"{'total':<8} {total:>7}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the CI tests
def _tree_digest() -> dict[str, str]:
    """The checkout's traces and docs by content: a campaign must write nothing outside its scratch folders."""
    import hashlib

    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in ("tests/regressions", "docs") for p in sorted((ROOT / folder).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def campaign_run():
    """The campaign's results per surface, and the checkout's files it changed."""
    before = _tree_digest()
    results = run_all(total_examples())
    after = _tree_digest()
    return results, {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


@pytest.fixture(scope="module")
def campaign(campaign_run):
    return campaign_run[0]


def test_campaign_writes_nothing_in_the_checkout(campaign_run):
    # the cli surface once overwrote a regression trace through `explain --svg PATH`
    assert not campaign_run[1], sorted(campaign_run[1])


@pytest.mark.parametrize("surface", SURFACES)
def test_campaign_surface(campaign, surface):
    rc, counts, err, _ = campaign[surface]
    assert rc == 0 and counts is not None, f"{surface}: the campaign failed:\n{err}"
    assert counts["_inputs"] >= share_of(surface, total_examples()), counts
    expected = {
        "cli": ("exit 2, one line", "exit 0"),
        "config": ("ConfigError", "accepted"),
        "trace": ("exit 2, one line", "replayed: match", "replayed: divergence"),
        "manager": ("RequestError, state unchanged", "ok", "out of slots, state unchanged",
                    "ConfigError naming a Manager argument"),
    }[surface]
    for outcome in expected:  # the generators reach every kind of answer, not only rejections
        assert counts.get(outcome, 0) > 0, (surface, outcome, counts)


def test_campaign_covers_at_least_5000_inputs(campaign):
    assert sum((c or {}).get("_inputs", 0) for _, c, _, _ in campaign.values()) >= 5000


def test_a_hang_is_caught_by_the_time_limit():
    with pytest.raises(Hang):
        with time_limit(0.05):
            while True:
                pass


def test_the_memory_limit_holds_in_a_child():
    code = "x = bytearray(8 * 1024**3)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=_limit_memory)
    assert proc.returncode != 0 and "MemoryError" in proc.stderr


# ----------------------------------------------------------------------------- command line
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.test_badinput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=total_examples(), help="inputs in all (split by surface)")
    parser.add_argument("--surface", action="append", choices=SURFACES, help="only these surfaces")
    parser.add_argument("--workers", type=int, default=2, help="surfaces run at once (default 2)")
    parser.add_argument("--child", choices=SURFACES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        counts = run_surface(args.child, args.examples)
        print(json.dumps(counts))
        return 0
    started = time.perf_counter()
    results = run_all(args.examples, tuple(args.surface or SURFACES), args.workers)
    print(format_table(results))
    print(f"wall {time.perf_counter() - started:.1f} s, {args.workers} surfaces at once")
    for surface, (rc, counts, err, _) in results.items():
        if rc != 0:
            print(f"--- {surface} failed:\n{err}", file=sys.stderr)
    return 0 if all(rc == 0 for rc, *_ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
