"""SGLang's room: :mod:`.backend` (the ``sglang`` and ``sglang-lazy`` backends), :mod:`.radix`
(``sglang-radix``), :mod:`.eagle` (``sglang-eagle``: its EAGLE worker's draft-slot allocation), :mod:`.eagle_v1`
(``sglang-eagle-v1``: 0.5.7's default EAGLE worker, drafts given back at the commit),
:mod:`.compat` (what differs between SGLang releases), :mod:`.matrix` (its release data), and the
one-off checks :mod:`.finding` (the allocator's finding, replayed) and :mod:`.radix_check` (the radix
cache's pinned divergences). SGLang itself is imported only by a factory or a check, in its own venv
(``scripts/sglang-venv``)."""
