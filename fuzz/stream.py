"""A fixed seed that draws the same examples whatever the project's source says.

Hypothesis (6.1xx) sometimes draws an integer or string from the literals it finds in the source of
every *local* module already imported (:func:`hypothesis.internal.conjecture.providers._get_local_constants`).
A campaign's example stream then depends on the text of ``reference/`` and of whatever other module
happens to be loaded: a new literal anywhere in the project, or a test file that imports one more
module, shifts every fixed-seed campaign, and a pinned budget (a mutant caught within 300 examples)
stops meaning anything. :func:`source_blind` pins the stream to the seed alone: while inside, the
local literals Hypothesis sees are none (its own global constants, the same for every project, stay).

Hypothesis has no public switch for this; the hook replaced is one module attribute, restored on
exit, and :mod:`tests.test_stream` fails if a Hypothesis release moves it (the constraints file pins
the release CI uses).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from hypothesis.internal.conjecture import providers as _providers

_HOOK = "_get_local_constants"


def _no_local_constants() -> "_providers.Constants":
    return _providers.Constants()


@contextlib.contextmanager
def source_blind() -> Iterator[None]:
    """While inside, Hypothesis draws no constant from the project's source (see the module's text).
    Reentrant; the cache of permitted constants is cleared on entry and exit, so nothing drawn
    outside leaks in or out."""
    if not hasattr(_providers, _HOOK):  # pragma: no cover - a Hypothesis release that moved it
        raise RuntimeError(f"hypothesis {_providers.__name__}.{_HOOK} is gone: pin the stream another way")
    saved = getattr(_providers, _HOOK)
    setattr(_providers, _HOOK, _no_local_constants)
    _providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        setattr(_providers, _HOOK, saved)
        _providers.CONSTANTS_CACHE.cache.clear()
