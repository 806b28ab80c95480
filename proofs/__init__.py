"""swafloor.proofs: the theorem catalogue and how it is discharged.

:mod:`.catalogue` (the theorems as data), :mod:`.discharge` (Z3), :mod:`.concrete` (the same goals on
ints over bounded ranges), :mod:`.replay` (refutations run on the reference manager), :mod:`.runner`
(all three, and their agreement), :mod:`.mutations`, :mod:`.docs`, :mod:`.bench`.
"""
