"""swafloor.fuzz: differential fuzzing of KV-cache managers against the reference.

Modules: :mod:`.protocol` (the backend protocol), :mod:`.backends` (the registry and the shipped
backends), :mod:`.strategies` and :mod:`.machine` (what Hypothesis generates), :mod:`.lockstep` and
:mod:`.compare` (running two backends together and comparing them), :mod:`.trace` and :mod:`.replay`
(saved traces), :mod:`.runner` (campaigns), :mod:`.plugin` (the pytest plugin), :mod:`.bench`.
Nothing is imported here, so the pytest plugin stays light.
"""
