"""swafloor.proofs: the theorem catalogue and how it is discharged.

:mod:`.catalogue` (the theorems as data), :mod:`.discharge` (Z3), :mod:`.concrete` (the same goals on
ints over bounded ranges), :mod:`.replay` (refutations run on the reference manager), :mod:`.runner`
(all three, and their agreement), :mod:`.mutations`, :mod:`.docs`, :mod:`.bench`.
"""

# Each solver's budget per theorem, in seconds (z3-free here so the CLI can show it without importing a
# solver). Alone every theorem proves within 7 s; on a loaded 2-core machine cvc5 took over 10 s on
# sharing-never-raises (an `unknown`, never a pass).
DEFAULT_TIMEOUT_S = 30.0
