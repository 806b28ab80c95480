"""Hugging Face transformers' room: :mod:`.backend` (the ``transformers-cb`` backend: the
continuous-batching paged cache and its sliding-window allocator), :mod:`.compat` (what differs
between transformers releases), :mod:`.matrix` (its release data). transformers' continuous batching
is imported only by the factory, in its own venv (``scripts/transformers-venv``)."""
