"""swafloor: a formally checked reference for sizing paged KV-cache pools under sliding-window attention.

Subpackages: :mod:`swafloor.reference` (the executable spec), :mod:`swafloor.proofs` (Z3 theorems),
:mod:`swafloor.fuzz` (differential testing of backends). The command line lives in :mod:`swafloor.cli`.
"""

__version__ = "0.1.0"
