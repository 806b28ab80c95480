"""TensorRT-LLM KVCacheManagerV2's whole manager on the CUDA stand-in and on the real CUDA driver,
compared (issue 31, its GPU part): ``python -m swafloor.fuzz.engines.trtllm.gpu_check --trtllm-source
PATH`` (or ``scripts/gpu-trtllm-check``, which also runs it from a checkout that is not installed).

Two *sides*, each its own process (so the two drivers never share one): ``standin`` loads the package
from PATH with the CPU stand-in of :mod:`.cuda_standin` in place of ``cuda.bindings.driver``;
``real`` loads it with the real driver (``cuda.bindings``, a CUDA device present). Each side runs the
``trtllm-v2`` ci campaign against the reference (``--examples``, fixed ``--seed``, no shrinking) and
then the progress properties (:mod:`.progress`), and records every call it makes to the adapter (the
operation, what it returned or raised) and every observation (``observe()``: pool totals, pool use,
lengths, tables), run by run. The two records are then compared:

- the same runs: each run's config and operations (a fixed seed draws the same examples);
- the same verdict: the campaign passed on both, or diverged on both in the same class (the field,
  the operation, the exception type), at the same run and step; each progress property on each
  config held, failed (its operation and why) or was not supported on both;
- the same observations step by step where both ran: the first difference is reported with its run,
  its step (the operation, as the fuzz reports write it) and the field that differs.

Exit 0: both sides ran to the end and agree; 1: they differ, or a side did not finish (its process
ended, or the ``--budget`` cut it), which leaves agreement unconfirmed; 2: bad input (one line);
3: no CUDA device and ``--require-gpu``. Without a device and without ``--require-gpu`` only the
stand-in side runs, and the report says that nothing was compared. ``--out FILE`` writes the report
as JSON, and the two sides' records beside it (``FILE`` without ``.json``, then ``-standin.jsonl``
and ``-real.jsonl``).

A test-only switch, ``--test-standin-as-real``, runs the stand-in on the "real" side too (the CI
tests have no GPU): every line and the JSON (``gpu_result: false``) say so, and it cannot be given
with ``--require-gpu``, so a run that requires a GPU and exits 0 compared the real driver.
A side's process reads :data:`SIDE_ENV` (``standin`` or ``real``) from its environment.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Hashable

__all__ = ["main", "Recorder", "compare_records", "read_record", "SIDE_ENV", "EXIT_NO_GPU"]

SIDE_ENV = "SWAFLOOR_GPU_CHECK_SIDE"
#: Where relative paths in the arguments are read from (set by scripts/gpu-trtllm-check, which runs in a
#: folder of its own); else the current folder.
CWD_ENV = "SWAFLOOR_GPU_CHECK_CWD"
MODULE = "swafloor.fuzz.engines.trtllm.gpu_check"
SIDES = ("standin", "real")
EXIT_NO_GPU = 3
#: Seconds kept back from ``--budget`` for starting the sides, comparing and writing the report.
RESERVE_SECONDS = 20.0
#: Of what is left, the share a side's campaign may use (the progress properties run after it).
CAMPAIGN_SHARE = 0.8
DEFAULT_EXAMPLES = 200
DEFAULT_BUDGET = 480


class BudgetSpent(Exception):
    """Raised inside a side's campaign (from its progress callback) once its deadline has passed."""


class UsageError(Exception):
    """Bad input: one line, exit 2."""


# --------------------------------------------------------------------------- recording one side
def _masked(text: str) -> str:
    """An exception message without addresses and object ids (which differ between any two runs)."""
    return re.sub(r"0x[0-9a-fA-F]+", "0x…", text)[:400]


def _returned(value: Any) -> Any:
    ok = getattr(value, "ok", None)
    if isinstance(ok, bool):  # an Outcome
        return {"ok": ok}
    return None if value is None else repr(value)[:200]


def _observation(value: Any) -> Any:
    from ...compare import jsonable
    from ...protocol import parts_of

    return {part.value: jsonable(v) for part, v in parts_of(value).items()}


class Recorder:
    """Wraps one adapter (a :class:`~.v2.TrtllmV2Backend`): every operation, with what it returned or
    raised, and every observation is appended to ``calls`` (a run's list); anything else is the
    adapter's. An exception is recorded and raised on, so the harness classifies it as it would."""

    def __init__(self, inner: Any, calls: list[dict]):
        self._inner = inner
        self._calls = calls

    def _call(self, text: str, fn: Callable[[], Any]) -> Any:
        try:
            value = fn()
        except Exception as exc:
            self._calls.append({"call": text, "raised": type(exc).__name__, "message": _masked(str(exc))})
            raise
        self._calls.append({"call": text, "returned": _returned(value)})
        return value

    def create(self, request_id: Hashable, reused_history: int = 0, **kw: Any) -> Any:
        return self._call(f"create({request_id!r}, reused_history={reused_history})",
                          lambda: self._inner.create(request_id, reused_history, **kw))

    def resume(self, request_id: Hashable) -> Any:
        return self._call(f"resume({request_id!r})", lambda: self._inner.resume(request_id))

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Any:
        return self._call(f"resize({request_id!r}, capacity={capacity}, history={history})",
                          lambda: self._inner.resize(request_id, capacity, history))

    def commit(self, request_id: Hashable, tokens: int) -> Any:
        return self._call(f"commit({request_id!r}, tokens={tokens})", lambda: self._inner.commit(request_id, tokens))

    def suspend(self, request_id: Hashable) -> Any:
        return self._call(f"suspend({request_id!r})", lambda: self._inner.suspend(request_id))

    def close(self, request_id: Hashable) -> Any:
        return self._call(f"close({request_id!r})", lambda: self._inner.close(request_id))

    def observe(self) -> Any:
        try:
            value = self._inner.observe()
        except Exception as exc:
            self._calls.append({"call": "observe()", "raised": type(exc).__name__, "message": _masked(str(exc))})
            raise
        self._calls.append({"call": "observe()", "observed": _observation(value)})
        return value

    def dispose(self) -> None:
        self._call("dispose()", self._inner.dispose)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Log:
    """A side's record, written as JSON lines as it goes (a side that is killed leaves what it did):
    a ``header``, one ``run`` per adapter built (``kind`` campaign or progress), the ``campaign``
    verdict, the ``progress`` verdicts and an ``end``."""

    def __init__(self, path: Path):
        self.file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self.run: dict | None = None
        self.runs = 0

    def write(self, key: str, value: Any) -> None:
        self.file.write(json.dumps({key: value}, default=str) + "\n")
        self.file.flush()

    def begin(self, kind: str, config: Any, **more: Any) -> list[dict]:
        self.finish()
        self.runs += 1
        self.run = {"index": self.runs, "kind": kind, **more, "config": config.to_dict(), "calls": []}
        return self.run["calls"]

    def finish(self, **more: Any) -> None:
        if self.run is not None:
            self.run.update(more)
            self.write("run", self.run)
            self.run = None

    def close(self) -> None:
        self.finish()
        self.file.close()


def divergence_class(divergence: dict | None) -> str | None:
    """A campaign divergence's class: the field (indices dropped), the operation (or "build"), and
    for an exception the backend raised, its type."""
    if divergence is None:
        return None
    field = re.sub(r"\[.*", "", divergence["field"])
    step = divergence.get("step")
    where = "after building" if step is None else f"at {step['op']}"
    got = divergence.get("backend")
    raised = ""
    if isinstance(got, dict) and got.get("kind") == "crash":
        raised = ": " + str(got.get("message", "")).split(":", 1)[0]
    return f"{field} {where}{raised}"


def property_class(result: Any) -> str:
    """A progress property's verdict on one config, as compared: held, not supported, or failed with
    its operation and why (or the pools below the floor)."""
    if result.ok is True:
        return "held"
    if result.ok is None:
        return "not supported"
    d = result.detail
    if "below_the_floor" in d:
        out = d.get("lone_request_runs_out")
        return "failed: below the floor" + (f", runs out at {out['operation']}" if out else "")
    return f"failed: {d.get('operation', '?')}: {d.get('why', '')}"


def _campaign_side(v2: Any, stream: Any, log: _Log, examples: int, seed: int, deadline: float,
                   out_dir: Path | None) -> dict:
    from ...protocol import BackendRecord, Unsupported, factory
    from ...runner import run_campaign
    from .v2 import CAPABILITIES, TrtllmV2Backend

    @factory(CAPABILITIES, name="trtllm-v2")
    def build(config: Any) -> Any:
        calls = log.begin("campaign", config)
        try:
            backend = TrtllmV2Backend(config, v2, stream)
        except Unsupported as exc:
            calls.append({"call": "build", "unsupported": str(exc)})
            raise
        except Exception as exc:
            calls.append({"call": "build", "raised": type(exc).__name__, "message": _masked(str(exc))})
            raise
        return Recorder(backend, calls)

    def budget(stats: Any) -> None:
        if time.monotonic() > deadline:
            raise BudgetSpent(f"the budget ended the campaign after {stats.examples} examples")

    try:
        result = run_campaign(BackendRecord("trtllm-v2", build), "reference", profile="ci", examples=examples,
                              seed=seed, shrink=False, out_dir=out_dir, progress=budget)
    except BudgetSpent as exc:
        log.finish()
        return {"verdict": "cut", "why": str(exc), "complete": False}
    log.finish()
    data = result.to_dict()
    divergence = data.get("divergence")
    return {"verdict": "pass" if divergence is None else "divergence", "class": divergence_class(divergence),
            "complete": True, "examples": data["examples"], "runs": data["runs"], "steps": data["steps"],
            "seconds": data["seconds"], "first_failure_example": data.get("first_failure_example"),
            "divergence": divergence, "trace_file": data.get("trace_file")}


def run_side(side: str, source: str, record: Path, *, examples: int, seed: int, deadline: float,
             standin_as_real: bool = False, out_dir: Path | None = None) -> int:
    """One side, in this process: load, campaign, progress properties, all recorded to ``record``."""
    from . import cuda_standin, progress as props
    from .whole import load_whole, standin_in_use

    started = time.monotonic()
    log = _Log(record)
    prefer = "standin" if side == "standin" or standin_as_real else "real"
    try:
        v2, stream = load_whole(source, prefer=prefer)
        used = "standin" if standin_in_use() is not None else "real"
        header = {"side": side, "driver": used, "test_standin_as_real": bool(standin_as_real and side == "real"),
                  "source": source, "python": sys.version.split()[0], "device": _device_name() if used == "real" else None}
        found = cuda_standin.bindings()
        if found is not None:
            header["cuda_bindings"] = getattr(sys.modules.get("cuda.bindings"), "__version__", None)
        log.write("header", header)
        campaign = _campaign_side(v2, stream, log, examples, seed, deadline, out_dir)
        log.write("campaign", campaign)

        def wrap(backend: Any, name: str, config: Any) -> Recorder:
            return Recorder(backend, log.begin("progress", config, property=name))

        results = props.run_progress(v2, stream, wrap=wrap)
        log.finish()
        log.write("progress", [{"property": r.name, "config": r.config.to_dict(), "verdict": property_class(r),
                                "detail": r.detail} for r in results])
        log.write("end", {"seconds": round(time.monotonic() - started, 2)})
    except Exception as exc:  # recorded: the parent reports it as this side not finishing
        log.finish()
        log.write("error", f"{type(exc).__name__}: {_masked(str(exc))}")
        return 1
    finally:
        log.close()
    return 0


def _device_name() -> str | None:
    try:
        from cuda.bindings import driver  # noqa: PLC0415

        err, dev = driver.cuDeviceGet(0)
        err2, name = driver.cuDeviceGetName(128, dev)
        if int(err) == 0 and int(err2) == 0:
            return bytes(name).split(b"\0", 1)[0].decode(errors="replace")
    except Exception:  # noqa: BLE001 - a name is a label only
        pass
    return None


# --------------------------------------------------------------------------- comparing two records
def read_record(path: Path) -> dict:
    """A side's record: its header, runs, campaign, progress, end or error (absent: not reached)."""
    out: dict[str, Any] = {"runs": []}
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            break  # a side killed while writing
        ((key, value),) = item.items()
        if key == "run":
            out["runs"].append(value)
        else:
            out[key] = value
    return out


def _first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                return f"{path}[{key}]", a.get(key, "(absent)"), b.get(key, "(absent)")
            found = _first_difference(a[key], b[key], f"{path}[{key}]" if path else key)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None if len(a) == len(b) else (f"{path} (length)", len(a), len(b))
    return None if a == b else (path, a, b)


def _run_name(run: dict) -> str:
    return f"campaign run {run['index']}" if run["kind"] == "campaign" else f"progress {run.get('property')} (run {run['index']})"


def compare_runs(a: dict, b: dict) -> dict | None:
    """The first difference between one run on the two sides: its step (the operations before it, -1:
    right after building), the call, the field, both values; None when the same."""
    if (a["kind"], a.get("property"), a["config"]) != (b["kind"], b.get("property"), b["config"]):
        return {"run": _run_name(a), "step": None, "call": None, "after": None, "field": "config (not the same example)",
                "standin": a["config"], "real": b["config"]}
    step, last = -1, "after building"
    for x, y in zip(a["calls"], b["calls"]):
        if x["call"] != "observe()":
            step += 1 if x["call"] not in ("build", "dispose()") else 0
            last = x["call"]
        found = _first_difference(x, y)
        if found is not None:
            field, left, right = found
            return {"run": _run_name(a), "step": step, "call": x["call"] if x["call"] == y["call"] else
                    f"{x['call']} / {y['call']}", "after": last, "field": field or "call", "standin": left, "real": right}
    if len(a["calls"]) != len(b["calls"]):
        longer = a if len(a["calls"]) > len(b["calls"]) else b
        extra = longer["calls"][min(len(a["calls"]), len(b["calls"]))]
        return {"run": _run_name(a), "step": step + 1, "call": extra["call"], "after": last,
                "field": "calls (one side stopped)", "standin": len(a["calls"]), "real": len(b["calls"])}
    return None


def campaign_verdict(c: dict | None) -> str:
    """A side's campaign verdict in words."""
    if c is None:
        return "did not run"
    if c["verdict"] == "cut":
        return f"cut by the budget ({c['why']})"
    if c["verdict"] == "pass":
        return f"pass ({c['examples']} examples, {c['steps']} steps)"
    return f"divergence: {c['class']} (example {c['first_failure_example']}, step {c['divergence']['step_index']})"


def compare_records(standin: dict, real: dict) -> dict:
    """The two sides compared: verdicts, runs, observations (see the module's docstring)."""
    from .progress import PROPERTIES

    rows: list[dict] = []
    camp_a, camp_b = standin.get("campaign"), real.get("campaign")

    def key(c: dict | None) -> Any:
        if c is None or c["verdict"] == "cut":
            return None
        d = c.get("divergence")
        return (c["verdict"], c.get("class"), c.get("first_failure_example"), None if d is None else d["step_index"],
                c["examples"] if c["verdict"] == "pass" else None)

    complete = all(c is not None and c.get("complete") for c in (camp_a, camp_b))
    rows.append({"part": "campaign (trtllm-v2 vs reference, ci)", "standin": campaign_verdict(camp_a), "real": campaign_verdict(camp_b),
                 "same": (key(camp_a) == key(camp_b)) if complete else None})
    prog_a, prog_b = standin.get("progress"), real.get("progress")
    if prog_a is None or prog_b is None:
        rows.append({"part": "progress properties", "standin": "ran" if prog_a else "did not run",
                     "real": "ran" if prog_b else "did not run", "same": None})
    else:
        for i, (x, y) in enumerate(zip(prog_a, prog_b)):
            same = x["property"] == y["property"] and x["config"] == y["config"] and x["verdict"] == y["verdict"]
            rows.append({"part": f"{x['property']} [config {i // len(PROPERTIES)}]", "standin": x["verdict"], "real": y["verdict"],
                         "same": same})
        if len(prog_a) != len(prog_b):
            rows.append({"part": "progress properties (count)", "standin": len(prog_a), "real": len(prog_b),
                         "same": False})
    pairs = []  # campaign runs with campaign runs, progress runs with progress runs, each in order
    counts = {}
    for kind in ("campaign", "progress"):
        runs_a = [r for r in standin["runs"] if r["kind"] == kind]
        runs_b = [r for r in real["runs"] if r["kind"] == kind]
        pairs += list(zip(runs_a, runs_b))
        counts[kind] = [len(runs_a), len(runs_b)]
    differences, compared, after_first = [], [], False
    for x, y in pairs:
        if x["kind"] == "campaign" and after_first:
            continue  # past a campaign run that differs, Hypothesis draws from what each side did: not comparable
        compared.append((x, y))
        found = compare_runs(x, y)
        if found is not None:
            differences.append(found)
            after_first = after_first or x["kind"] == "campaign"
    pairs = compared
    steps = sum(sum(1 for c in x["calls"] if c["call"] not in ("observe()", "build", "dispose()")) for x, _ in pairs)
    finished = all("end" in r for r in (standin, real))
    differ = bool(differences) or any(r["same"] is False for r in rows) or (
        finished and counts["campaign"][0] != counts["campaign"][1] and key(camp_a) == key(camp_b))
    differ = differ or (finished and counts["progress"][0] != counts["progress"][1])
    return {"rows": rows, "runs_compared": len(pairs), "runs": counts,
            "steps_compared": steps, "differences": differences[:20], "runs_differing": len(differences),
            "complete": complete and finished, "differ": differ}


# --------------------------------------------------------------------------- the command
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2 (argparse's own prints the usage too)
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpu-trtllm-check", description=__doc__.split("\n\n")[0])
    p.add_argument("--trtllm-source", metavar="PATH", default=os.environ.get("SWAFLOOR_TRTLLM_SOURCE"),
                   help="a Python-era kv_cache_manager_v2 folder (or a checkout holding one)")
    p.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, help="campaign examples per side (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="seconds for the whole run (default 480)")
    p.add_argument("--out", type=Path, default=None, help="the JSON report (the sides' records beside it)")
    p.add_argument("--require-gpu", action="store_true", help="exit 3 where no CUDA device is present")
    p.add_argument("--test-standin-as-real", action="store_true",
                   help="TEST ONLY: the stand-in on the 'real' side too (never a GPU result)")
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--record", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    return p


def _checked(args: argparse.Namespace) -> str:
    from .loader import LoadError, resolve_source

    if not args.trtllm_source:
        raise UsageError("--trtllm-source: a kv_cache_manager_v2 folder is needed (or $SWAFLOOR_TRTLLM_SOURCE)")
    if args.examples < 1:
        raise UsageError(f"--examples={args.examples}: must be at least 1")
    if not args.budget > RESERVE_SECONDS:
        raise UsageError(f"--budget={args.budget}: must be more than {RESERVE_SECONDS:g} seconds")
    if args.require_gpu and args.test_standin_as_real:
        raise UsageError("--test-standin-as-real: cannot be given with --require-gpu (it never makes a GPU result)")
    if args.out is not None and args.out.is_dir():
        raise UsageError(f"--out={args.out}: is a folder; give a file name for the JSON report")
    try:
        return str(resolve_source(args.trtllm_source).resolve())
    except LoadError as exc:
        raise UsageError(f"--trtllm-source={args.trtllm_source}: {exc}") from None


def _loadable(source: str) -> None:
    """Load the package once here, on the stand-in, so a source (or a cuda-bindings) that cannot be
    loaded is bad input (exit 2) before any side starts."""
    from .loader import LoadError
    from .whole import load_whole

    try:
        load_whole(source, prefer="standin")
    except LoadError as exc:
        raise UsageError(f"--trtllm-source={source}: {exc}") from None


def _spawn(side: str, source: str, record: Path, args: argparse.Namespace, deadline_s: float,
           out_dir: Path | None) -> subprocess.Popen:
    command = [sys.executable, "-m", MODULE, "--side", side, "--trtllm-source", source, "--record", str(record),
               "--examples", str(args.examples), "--seed", str(args.seed), "--deadline", str(deadline_s)]
    if args.test_standin_as_real:
        command.append("--test-standin-as-real")
    if out_dir is not None:
        command += ["--out", str(out_dir)]
    env = dict(os.environ, **{SIDE_ENV: side})
    env.pop("SWAFLOOR_CUDA_DRIVER", None)  # each side names its driver itself
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _label(record: dict, side: str) -> str:
    h = record.get("header")
    if h is None:
        return f"{side}: did not load ({record.get('error', 'no record')})"
    if h.get("test_standin_as_real"):
        return "real: TEST ONLY, the CPU stand-in forced in place of the real driver (not a GPU result)"
    if h["driver"] == "real":
        return f"real: the real CUDA driver, {h.get('device') or 'a CUDA device'} (cuda-bindings {h.get('cuda_bindings')})"
    return f"{side}: the CPU stand-in (cuda_standin)"


def _print_report(report: dict) -> None:
    print(f"gpu-trtllm-check: {report['source']}")
    for line in report["sides_label"]:
        print(f"  {line}")
    for note in report["notes"]:
        print(f"  NOTE: {note}")
    cmp = report.get("comparison")
    if cmp is None:
        record = report["records"]["standin"]
        print(f"  stand-in campaign: {campaign_verdict(record.get('campaign'))}")
        verdicts = [p["verdict"] for p in record.get("progress", [])]
        print(f"  stand-in progress properties: " + (", ".join(f"{verdicts.count(v)} {v}" for v in sorted(set(verdicts)))
                                                     or "did not run"))
        print(f"  result: {report['result']}")
        return
    shown: list[dict] = []  # a property whose configs all agree on one verdict: one line
    groups: dict[str, list[dict]] = {}
    for r in cmp["rows"]:
        groups.setdefault(r["part"].split(" [config ")[0], []).append(r)
    for name, rows in groups.items():
        if len(rows) > 1 and all(r["same"] and r["standin"] == r["real"] == rows[0]["standin"] for r in rows):
            shown.append(dict(rows[0], part=f"{name} [{len(rows)} configs]"))
        else:
            shown += rows
    width = max(len(r["part"]) for r in shown)
    print(f"  {'part':<{width}}  {'same':<4}  stand-in | real")
    for r in shown:
        same = {True: "yes", False: "NO", None: "?"}[r["same"]]
        text = r["standin"] if r["standin"] == r["real"] else f"{r['standin']} | {r['real']}"
        print(f"  {r['part']:<{width}}  {same:<4}  {text}")
    runs = cmp["runs"]
    print(f"  observations: {cmp['steps_compared']} operations in {cmp['runs_compared']} runs compared step by step "
          f"(campaign runs: stand-in {runs['campaign'][0]}, real {runs['campaign'][1]}; progress runs: stand-in "
          f"{runs['progress'][0]}, real {runs['progress'][1]}); {cmp['runs_differing']} runs differ")
    for d in cmp["differences"][:5]:
        where = ("" if d["step"] is None else "after building" if d["step"] == -1
                 else f"at step {d['step']} ({d['after']})")
        print(f"  DIFFERENCE: {d['run']}, {where}: {d['call']}: {d['field']}: stand-in "
              f"{json.dumps(d['standin'], default=str)}, real {json.dumps(d['real'], default=str)}")
    print(f"  result: {report['result']}")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"gpu-trtllm-check: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return 2 if exc.code else 0
    if args.side is not None:  # one side, in this process
        assert args.record is not None and args.deadline is not None
        return run_side(args.side, args.trtllm_source, args.record, examples=args.examples, seed=args.seed,
                        deadline=time.monotonic() + args.deadline, standin_as_real=args.test_standin_as_real,
                        out_dir=args.out)
    started = time.monotonic()
    base = Path(os.environ.get(CWD_ENV) or os.getcwd())
    if args.out is not None and not args.out.is_absolute():
        args.out = base / args.out
    if args.trtllm_source and not Path(args.trtllm_source).is_absolute():
        args.trtllm_source = str(base / args.trtllm_source)
    try:
        source = _checked(args)
    except UsageError as exc:
        print(f"gpu-trtllm-check: {exc}", file=sys.stderr)
        return 2
    from . import cuda_standin

    gpu = cuda_standin.device_present()
    try:
        _loadable(source)
    except UsageError as exc:
        print(f"gpu-trtllm-check: {exc}", file=sys.stderr)
        return 2
    notes: list[str] = []
    if not gpu and args.require_gpu:
        print("gpu-trtllm-check: no CUDA device is present (cuda.bindings' cuDeviceGetCount), and --require-gpu "
              "was given", file=sys.stderr)
        return EXIT_NO_GPU
    sides = ["standin", "real"] if gpu or args.test_standin_as_real else ["standin"]
    if args.test_standin_as_real:
        notes.append("TEST ONLY (--test-standin-as-real): both sides ran the CPU stand-in; this is not a GPU result")
    elif not gpu:
        notes.append("NO CUDA DEVICE: only the stand-in side ran; nothing was compared")
    folder = Path(tempfile.mkdtemp(prefix="gpu-trtllm-check-")) if args.out is None else args.out.parent
    folder.mkdir(parents=True, exist_ok=True)
    stem = "gpu-trtllm-check" if args.out is None else args.out.name.removesuffix(".json")
    records = {side: folder / f"{stem}-{side}.jsonl" for side in sides}
    left = args.budget - RESERVE_SECONDS - (time.monotonic() - started)
    traces = folder / f"{stem}-traces"
    procs = {side: _spawn(side, source, records[side], args, left * CAMPAIGN_SHARE, traces / side) for side in sides}
    ended: dict[str, str] = {}
    for side, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=max(1.0, args.budget - RESERVE_SECONDS / 2 - (time.monotonic() - started)))
            ended[side] = f"exit {proc.returncode}"
            if proc.returncode != 0 and err.strip():
                notes.append(f"the {side} side's stderr (last line): {err.strip().splitlines()[-1][:300]}")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            ended[side] = "killed at the budget"
            notes.append(f"the {side} side was killed at the budget ({args.budget:g} s)")
    read = {side: read_record(records[side]) for side in sides}
    for side in sides:
        if "error" in read[side]:
            notes.append(f"the {side} side stopped: {read[side]['error']}")
        if (read[side].get("campaign") or {}).get("verdict") == "cut":
            notes.append(f"the {side} side's campaign was cut by the budget: raise --budget or lower --examples")
        h = read[side].get("header") or {}
        if side == "real" and h and h.get("driver") != "real" and not h.get("test_standin_as_real"):
            notes.append("the real side did not load the real driver")
            read[side].pop("end", None)  # never counted as a finished real run
    report: dict[str, Any] = {"source": source, "examples": args.examples, "seed": args.seed, "budget": args.budget,
                              "gpu_present": gpu, "gpu_result": gpu and "real" in sides and not args.test_standin_as_real,
                              "test_standin_as_real": args.test_standin_as_real,
                              "sides_label": [_label(read[s], s) for s in sides], "ended": ended,
                              "records": {s: str(records[s]) for s in sides}, "notes": notes}
    if len(sides) == 1:
        report["comparison"] = None
        report["agree"] = None
        camp = read["standin"].get("campaign") or {}
        report["standin_campaign"] = {k: camp.get(k) for k in ("verdict", "class", "examples", "steps")}
        report["standin_progress"] = [p["verdict"] for p in read["standin"].get("progress", [])]
        report["result"] = "STAND-IN ONLY: nothing compared (no CUDA device)"
        code = 0 if "end" in read["standin"] else 1
    else:
        cmp = compare_records(read["standin"], read["real"])
        report["comparison"] = cmp
        if cmp["differ"]:
            report["agree"], report["result"], code = False, "DIFFER", 1
        elif not cmp["complete"]:
            report["agree"], report["result"], code = None, "INCOMPLETE: a side did not finish; agreement unconfirmed", 1
        else:
            report["agree"], code = True, 0
            report["result"] = ("agree (TEST ONLY: both sides the CPU stand-in; not a GPU result)"
                                if args.test_standin_as_real else "agree: the stand-in and the real CUDA driver")
    report["exit_code"] = code
    report["seconds"] = round(time.monotonic() - started, 2)
    report["records_read"] = {s: {k: v for k, v in read[s].items() if k != "runs"} for s in sides}
    _print_report({**report, "records": read})
    if args.out is not None:
        args.out.write_text(json.dumps({k: v for k, v in report.items() if k != "records_read"} | {
            "sides": report["records_read"]}, indent=2, default=str) + "\n", encoding="utf-8")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
