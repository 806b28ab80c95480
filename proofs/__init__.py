"""swafloor.proofs: the theorem catalogue and how it is discharged.

:mod:`.catalogue` (the theorems as data), :mod:`.discharge` (Z3), :mod:`.concrete` (the same goals on
ints over bounded ranges), :mod:`.replay` (refutations run on the reference manager), :mod:`.runner`
(all three, and their agreement), :mod:`.mutations`, :mod:`.docs`, :mod:`.bench`.
"""

# The budgets (z3-free here so the CLI can show them without importing a solver). A solver's work is
# bounded per check by its own resource units, which do not depend on the machine or its load, so an
# answer is the same on a laptop and a loaded CI runner (a wall-clock budget of 30 s once turned
# sharing-never-raises on cvc5 into `unknown` on a loaded 2-core machine; never a pass, but not
# reproducible either). The limits are several times what the slowest check needs at seeds 0 to 9
# (tests/test_proofs_robust.py runs seeds 0 to 2 under them in CI). The seconds are only a safety net per
# theorem and solver.
DEFAULT_RLIMIT = {"z3": 20_000_000, "cvc5": 100_000}
DEFAULT_TIMEOUT_S = 300.0
