"""Traces: a config plus the list of operations run on it, saved as versioned, validated JSON.

A trace is backend-independent: replaying it (:mod:`swafloor.fuzz.replay`) runs the same steps on
any two backends and compares them after each step. The JSON form is::

    {
      "schema": "swafloor-trace/1",
      "config": {... Config.to_dict() ...},
      "steps": [{"op": "create", "request": "r0", "reused_history": 0},
                {"op": "resume", "request": "r0"},
                {"op": "resize", "request": "r0", "capacity": 9, "history": 8},
                {"op": "commit", "request": "r0", "tokens": 1}, ...],
      "backend": "mutant:floor-division",   # the backend compared (null: none recorded)
      "against": "reference",               # what it was compared with
      "expect": "divergence",               # or "match"
      "divergence": {...},                  # informational: what was found (optional)
      "found": {...}                        # informational: seed, examples (optional)
    }

Loading validates every field and raises :class:`TraceError` naming the field and the value. It is
bounded: a file over :data:`MAX_TRACE_BYTES` (``/dev/zero`` included) or nested deeper than
:data:`MAX_DEPTH` is refused before it is parsed; numbers beyond :data:`MAX_NUMBER` in magnitude,
``NaN`` and ``Infinity`` are refused; messages quote bounded forms of values.

A trace names backends only by their registered names (``reference``, ``oracle``, ``mutant:...``):
:func:`swafloor.fuzz.replay.replay` never imports a ``MODULE:FACTORY`` that a trace file names, as
replaying a file someone sent you must not run code of their choosing. Give such a spec on the
command line (``--backend`` / ``--against``) instead.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Mapping

import attrs

from swafloor.reference import Config, ConfigError, SwafloorError
from swafloor.reference.show import bounded, one_line

from .protocol import Operation

__all__ = [
    "SCHEMA",
    "TraceError",
    "Step",
    "Trace",
    "load",
    "loads",
    "save",
    "from_dict",
    "to_dict",
    "EXPECT_VALUES",
    "MAX_TRACE_BYTES",
    "MAX_DEPTH",
    "MAX_NUMBER",
    "MAX_REQUEST_CHARS",
]

SCHEMA = "swafloor-trace/1"
EXPECT_VALUES = ("divergence", "match")

#: The largest trace file read (bytes); a trace of 100,000 steps fits.
MAX_TRACE_BYTES = 16 * 1024 * 1024
#: The deepest nesting of JSON arrays and objects accepted (a trace needs 4).
MAX_DEPTH = 64
#: The largest magnitude of a step's integer argument.
MAX_NUMBER = 10**18
#: The longest request id.
MAX_REQUEST_CHARS = 256

# The argument fields of each operation, in JSON order, with defaults (None: required).
_ARGUMENTS: dict[Operation, tuple[tuple[str, int | None], ...]] = {
    Operation.CREATE: (("reused_history", 0),),
    Operation.RESUME: (),
    Operation.RESIZE: (("capacity", None), ("history", None)),
    Operation.COMMIT: (("tokens", None),),
    Operation.SUSPEND: (),
    Operation.CLOSE: (),
}


class TraceError(SwafloorError, ValueError):
    """A trace file or value is malformed: ``field`` names it (a JSON path), ``value`` holds it."""

    def __init__(self, field: str, value: Any, reason: str):
        self.field = field
        self.value = value
        self.reason = reason
        shown_field = field if len(field) <= 120 and field.isprintable() else bounded(field, 120)
        shown_reason = reason.replace("\n", "\\n").replace("\r", "\\r")
        super().__init__(f"{shown_field}={bounded(value)}: {shown_reason}")


def _operation(value: Any) -> Operation:
    """``value`` as an Operation; an Operation as it is (the fuzzer makes a step per operation)."""
    return value if type(value) is Operation else Operation(value)


@attrs.frozen
class Step:
    """One operation with its arguments. Unused arguments are None."""

    op: Operation = attrs.field(converter=_operation)
    request: str
    capacity: int | None = None
    history: int | None = None
    tokens: int | None = None
    reused_history: int | None = None
    share_with: str | None = None  # create only: the request whose committed prefix it starts from

    def arguments(self) -> dict[str, Any]:
        args: dict[str, Any] = {name: getattr(self, name) for name, _ in _ARGUMENTS[self.op]}
        if self.share_with is not None:
            args["share_with"] = self.share_with
        return args

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op.value, "request": self.request, **self.arguments()}

    def describe(self) -> str:
        args = ", ".join(f"{k}={bounded(v)}" for k, v in self.arguments().items())
        return f"{self.op.value}({bounded(self.request)}{', ' + args if args else ''})"

    # Constructors that read like the operations.
    @classmethod
    def create(cls, request: str, reused_history: int = 0, share_with: str | None = None) -> "Step":
        return cls(Operation.CREATE, request, reused_history=reused_history, share_with=share_with)

    @classmethod
    def resume(cls, request: str) -> "Step":
        return cls(Operation.RESUME, request)

    @classmethod
    def resize(cls, request: str, capacity: int, history: int) -> "Step":
        return cls(Operation.RESIZE, request, capacity=capacity, history=history)

    @classmethod
    def commit(cls, request: str, tokens: int) -> "Step":
        return cls(Operation.COMMIT, request, tokens=tokens)

    @classmethod
    def suspend(cls, request: str) -> "Step":
        return cls(Operation.SUSPEND, request)

    @classmethod
    def close(cls, request: str) -> "Step":
        return cls(Operation.CLOSE, request)


@attrs.frozen
class Trace:
    """A config and the steps run on it, with what comparing ``backend`` against ``against`` gave."""

    config: Config
    steps: tuple[Step, ...] = attrs.field(converter=tuple)
    backend: str | None = None
    against: str = "reference"
    expect: str = "match"
    divergence: Mapping[str, Any] | None = attrs.field(default=None, eq=False, hash=False)
    found: Mapping[str, Any] | None = attrs.field(default=None, eq=False, hash=False)


def to_dict(trace: Trace) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "config": trace.config.to_dict(),
        "steps": [step.to_dict() for step in trace.steps],
        "backend": trace.backend,
        "against": trace.against,
        "expect": trace.expect,
    }
    if trace.divergence is not None:
        data["divergence"] = dict(trace.divergence)
    if trace.found is not None:
        data["found"] = dict(trace.found)
    return data


def _key(key: Any) -> str:
    """A JSON key as it appears in a field name: plain when short and printable, else bounded."""
    if isinstance(key, str) and len(key) <= 40 and key.isprintable():
        return key
    return bounded(key, 40)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _step_from_dict(index: int, raw: Any) -> Step:
    where = f"steps[{index}]"
    if not isinstance(raw, dict):
        raise TraceError(where, raw, "must be an object")
    if "op" not in raw:
        raise TraceError(f"{where}.op", None, "missing")
    try:
        op = Operation(raw["op"])
    except (ValueError, TypeError):
        raise TraceError(f"{where}.op", raw["op"], f"must be one of {[o.value for o in Operation]}") from None
    request = raw.get("request")
    if not isinstance(request, str) or not request:
        raise TraceError(f"{where}.request", request, "must be a non-empty string")
    if len(request) > MAX_REQUEST_CHARS:
        raise TraceError(f"{where}.request", request, f"longer than {MAX_REQUEST_CHARS} characters")
    allowed = {"op", "request"} | {name for name, _ in _ARGUMENTS[op]} | ({"share_with"} if op is Operation.CREATE else set())
    for key in raw:
        if key not in allowed:
            raise TraceError(f"{where}.{_key(key)}", raw[key], f"unknown field for op {op.value!r}")
    args: dict[str, int] = {}
    for name, default in _ARGUMENTS[op]:
        value = raw.get(name, default)
        if value is None:
            raise TraceError(f"{where}.{name}", None, f"missing (op {op.value!r} needs it)")
        if not _is_int(value):
            raise TraceError(f"{where}.{name}", value, "must be an integer")
        if not -MAX_NUMBER <= value <= MAX_NUMBER:
            raise TraceError(f"{where}.{name}", value, f"out of range (at most {MAX_NUMBER:.0e} in magnitude)")
        args[name] = value
    share_with = raw.get("share_with")
    if share_with is not None and (not isinstance(share_with, str) or not share_with or len(share_with) > MAX_REQUEST_CHARS):
        raise TraceError(f"{where}.share_with", share_with, "must be a non-empty request id")
    return Step(op, request, share_with=share_with, **args)


def from_dict(data: Any) -> Trace:
    """Validate and build a trace from its JSON form; raises :class:`TraceError`."""
    if not isinstance(data, dict):
        raise TraceError("trace", data, "must be a JSON object")
    if "schema" not in data:
        raise TraceError("schema", None, f"missing (expected {SCHEMA!r})")
    if data["schema"] != SCHEMA:
        raise TraceError("schema", data["schema"], f"unsupported schema (expected {SCHEMA!r})")
    known = {"schema", "config", "steps", "backend", "against", "expect", "divergence", "found"}
    for key in data:
        if key not in known:
            raise TraceError(_key(key), data[key], "unknown field")
    if "config" not in data:
        raise TraceError("config", None, "missing")
    try:
        config = Config.from_dict(data["config"])
    except ConfigError as exc:
        field = exc.field if exc.field.startswith("config") else f"config.{exc.field}"
        raise TraceError(field, exc.value, exc.reason) from None
    except (TypeError, ValueError) as exc:  # e.g. a converter rejecting a value
        raise TraceError("config", data["config"], one_line(exc)) from None
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise TraceError("steps", steps, "must be a list")
    parsed = tuple(_step_from_dict(i, raw) for i, raw in enumerate(steps))
    for key in ("backend", "against"):
        value = data.get(key, None if key == "backend" else "reference")
        if value is not None and (not isinstance(value, str) or not value):
            raise TraceError(key, value, "must be a non-empty string" + (" or null" if key == "backend" else ""))
    if data.get("against") is None and "against" in data:
        raise TraceError("against", None, "must be a non-empty string")
    expect = data.get("expect", "match")
    if expect not in EXPECT_VALUES:
        raise TraceError("expect", expect, f"must be one of {list(EXPECT_VALUES)}")
    if expect == "divergence" and data.get("backend") is None:
        raise TraceError("backend", None, "a trace that expects a divergence must name the backend")
    for key in ("divergence", "found"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise TraceError(key, data[key], "must be an object or null")
    return Trace(
        config=config,
        steps=parsed,
        backend=data.get("backend"),
        against=data.get("against", "reference"),
        expect=expect,
        divergence=data.get("divergence"),
        found=data.get("found"),
    )


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings skipped), without
    parsing it: no recursion, linear time."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a trace may hold")


def loads(text: str, where: str = "file") -> Trace:
    """Validate and build a trace from JSON text; raises :class:`TraceError`."""
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise TraceError(where, text, f"nests {depth} levels deep (at most {MAX_DEPTH})")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise TraceError(where, text, f"is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # a number too long to convert, NaN, Infinity
        raise TraceError(where, text, f"is not a valid trace: {one_line(exc)}") from None
    return from_dict(data)


class _NotRegular(Exception):
    def __init__(self, kind: str):
        self.kind = kind


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return kind
    return "special file"


def _read_regular(path: str | Path, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file. Opened without blocking (a FIFO with no writer would
    block ``open`` forever) and refused, by what the open descriptor is, unless a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _NotRegular(_kind(mode))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit)
    finally:
        os.close(fd)


def load(path: str | Path) -> Trace:
    """Read and validate a trace file; raises :class:`TraceError` (field ``file`` for I/O and JSON).
    At most :data:`MAX_TRACE_BYTES` are read, so a huge file is refused cheaply; anything but a regular
    file (a FIFO, which would block forever, ``/dev/zero``, a folder) is refused before reading."""
    shown = str(path)
    try:
        raw = _read_regular(path, MAX_TRACE_BYTES + 1)
    except _NotRegular as exc:
        raise TraceError("file", shown, f"is not a regular file (a {exc.kind})") from None
    except OSError as exc:
        raise TraceError("file", shown, f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    except ValueError as exc:  # e.g. an embedded NUL in the name
        raise TraceError("file", shown, f"cannot be read ({one_line(exc)})") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise TraceError("file", shown, f"is larger than {MAX_TRACE_BYTES // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError("file", shown, "is not UTF-8 text") from None
    try:
        return loads(text)
    except TraceError as exc:
        if exc.field != "file":
            raise
        raise TraceError("file", shown, exc.reason) from None


def save(trace: Trace, path: str | Path) -> Path:
    """Write a trace as JSON (creating the folder); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(trace), indent=2) + "\n", encoding="utf-8")
    return path
