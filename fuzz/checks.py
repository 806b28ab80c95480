"""Every ``python -m`` check of :mod:`swafloor.fuzz`: one :class:`Check` each, with what it shows,
where it runs and how long it takes; the docs' table of them is generated from :data:`CHECKS`
(``swafloor docs build``), and a test holds the list to the modules that have a ``__main__`` entry.

A check is a module run on its own, outside the test suite, for a figure or a finding: the engines'
checks live in their rooms (:mod:`swafloor.fuzz.engines`), the harness's at the top of ``fuzz/``.
``typical`` is a wall time measured on this project's 2-core machine, ``measured`` says when and how;
a check not timed yet, or needing what that machine lacks (a GPU), says so instead of a number.
"""

from __future__ import annotations

import attrs

__all__ = ["Check", "CHECKS"]


@attrs.frozen
class Check:
    """One ``python -m`` check: ``module`` (its dotted name), ``usage`` (its arguments), ``shows`` (what
    it prints), ``runs_in`` (the interpreter it needs), ``typical`` (its wall time) and ``measured``
    (how that time was taken), ``tested_by`` (the test that runs it, if any)."""

    module: str
    usage: str
    shows: str
    runs_in: str
    typical: str
    measured: str
    tested_by: str = ""

    @property
    def command(self) -> str:
        return f"python -m {self.module}" + (f" {self.usage}" if self.usage else "")


_MAIN = "the main venv"
_VLLM = "the vLLM venv (`scripts/vllm-venv`)"
_SGLANG = "the SGLang venv (`scripts/sglang-venv`)"

CHECKS: tuple[Check, ...] = (
    Check("swafloor.fuzz.bench", "",
          "per seeded bug, the median examples and seconds to catch it over 5 seeds; differential steps "
          "per second of reference vs oracle (`swafloor bench fuzz`)",
          _MAIN, "not timed yet", "its figures are rerun by `swafloor docs build`, which records no wall time"),
    Check("swafloor.fuzz.reference_mutants", "[NAME ...] [--examples N] [--save DIR] [--json]",
          "the oracle campaign against each seeded bug of the reference: the example and time of each "
          "kill, their medians and the mutation score",
          _MAIN, "about 7 minutes (419 s, 44 mutants, 300 examples each)", "measured 2026-12-02 on the shared 2-core machine, other work running", "tests/test_reference_mutants.py"),
    Check("swafloor.fuzz.engines.vllm.hit_diff", "[--cases N] [--seed S] [--json] [--replay TRACE]",
          "vLLM's own prefix-cache hit function against the model's longest valid hit: equal, lost "
          "(shorter) or bug (longer), per case",
          _VLLM, "about 70 s with the default cases (vLLM 0.33.0)", "measured 2026-12-02 on the shared 2-core machine, other work running", "tests/test_vllm_hits.py"),
    Check("swafloor.fuzz.engines.sglang.finding", "",
          "`alloc_decode`'s non-atomicity on SGLang's own allocator: the pages an unchecked caller loses "
          "(one JSON object)",
          _SGLANG, "about 90 s (87 s; SGLang 0.5.23, mostly its import)", "measured 2026-12-02 on the shared 2-core machine, other work running", "tests/test_sglang.py"),
    Check("swafloor.fuzz.engines.sglang.radix_check", "--examples N --out DIR [--plant NAME ...] [--replay TRACE ...]",
          "the `sglang-radix` ci campaign, then the same with each bug planted in SGLang's radix path, "
          "and the pinned traces replayed (one JSON object)",
          _SGLANG, "about 6 minutes with `--examples 120` (377 s: the clean campaign and the six plants)", "measured 2026-12-02 on the shared 2-core machine, other work running", "tests/test_sglang_radix.py"),
    Check("swafloor.fuzz.engines.dataplane.bench", "",
          "steps per second of `dataplane:reference` beside the table-only campaign, and replaying a "
          "decode workload (`swafloor bench dataplane`)",
          _MAIN + " with torch (`swafloor[dataplane]`)", "not timed yet", "its figures are rerun by `swafloor docs build`, which records no wall time"),
    Check("swafloor.fuzz.engines.dataplane.gpu_check", "",
          "`dataplane:reference` for 300 examples on CUDA, the two data-caught seeded bugs, and the "
          "data-plane steps per second on the CPU and on CUDA (`scripts/gpu-dataplane-check`)",
          "a python with torch built for CUDA, on a CUDA machine", "not timed: no GPU run of it is recorded", "it needs a CUDA machine"),
)
