"""SGLang's ``full_to_swa_index_mapping`` under identity, after every operation (the ``sglang`` and
``sglang-radix`` backends): the adapter's own check, a ``BackendCheckFailed`` on part ``mapping`` at the
operation that breaks it.

SGLang pairs each full-attention KV slot with an SWA slot through one tensor, the allocator's
``full_to_swa_index_mapping`` (0: no SWA slot; SWA slot 0 is the padding slot). Two things must hold on
it at every step, whoever holds the full slot (a request's row, the radix tree, or nobody):

- **no mapping to a freed SWA slot**: a full slot mapped to ``m > 0`` while ``m``'s SWA page is on the SWA
  allocator's free lists (``free_pages``, and ``release_pages`` / ``staged_pages`` where a release has
  them). The next allocation hands that page to another request while the first still reads it through
  the stale mapping: a double use. Also a free full slot left mapped (freed, its mapping not cleared).
- **no SWA slot mapped twice**: two distinct full slots mapped to the same SWA slot (one request's KV
  written over another's).

The message names the holders of the full slots involved (which request, which token of its row)
where a request's row holds them.
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable

from ...protocol import BackendCheckFailed

__all__ = ["free_page_ids", "check_mapping"]


def free_page_ids(sub: Any) -> set[int]:
    """The page ids an SGLang sub-allocator counts as free: its ``free_pages`` plus ``release_pages`` and
    ``staged_pages`` where a release has them (page ids; slot ids when the page size is 1)."""
    pages = {int(x) for x in sub.free_pages.tolist()}
    for staged in getattr(sub, "staged_pages", None) or []:
        pages |= {int(x) for x in staged.tolist()}
    release = getattr(sub, "release_pages", None)
    if release is not None:
        pages |= {int(x) for x in release.tolist()}
    return pages


def _holders(torch: Any, rows: Iterable[tuple[Hashable, Any]], slot: int) -> str:
    """Which rows hold full slot ``slot`` (request and token), for a message."""
    found = []
    for rid, row in rows:
        at = (row.to(torch.int64) == slot).nonzero().view(-1).tolist()
        found += [f"request {rid!r} token {p}" for p in at[:2]]
    return ", ".join(found) if found else "no open request's row"


def check_mapping(torch: Any, allocator: Any, rows: list[tuple[Hashable, Any]], page_size: int,
                  label: str = "") -> None:
    """Check ``allocator``'s ``full_to_swa_index_mapping`` (see the module docstring); ``rows``: each open
    request's id and its row's allocated slots (for messages only)."""
    mapping = allocator.full_to_swa_index_mapping.to(torch.int64)
    n = int(mapping.numel())
    full = torch.arange(n, dtype=torch.int64)
    mapped = (mapping > 0).nonzero().view(-1)
    fulls, swas = full[mapped], mapping[mapped]
    P = page_size
    where = f" ({label})" if label else ""
    free_swa = free_page_ids(allocator.swa_attn_allocator)
    if free_swa and swas.numel():
        is_free = torch.tensor([int(s) // P in free_swa for s in swas.tolist()], dtype=torch.bool)
        if bool(is_free.any()):
            k = int(is_free.nonzero()[0])
            f, s = int(fulls[k]), int(swas[k])
            raise BackendCheckFailed(
                "mapping", f"full slot {f} ({_holders(torch, rows, f)}) maps to SWA slot {s}, whose SWA page "
                f"{s // P} is free{where}: a mapping left pointing at a freed SWA slot")
    free_full = free_page_ids(allocator.full_attn_allocator)
    if free_full and fulls.numel():
        is_free = torch.tensor([int(f) // P in free_full for f in fulls.tolist()], dtype=torch.bool)
        if bool(is_free.any()):
            k = int(is_free.nonzero()[0])
            f, s = int(fulls[k]), int(swas[k])
            raise BackendCheckFailed(
                "mapping", f"full slot {f} is free (full page {f // P} on the free list) but still maps to SWA "
                f"slot {s}{where}: a freed full slot whose mapping was not cleared")
    if swas.numel() > 1:
        ordered, order = torch.sort(swas)
        same = (ordered[1:] == ordered[:-1]).nonzero().view(-1)
        if same.numel():
            i = int(same[0])
            a, b, s = int(fulls[order[i]]), int(fulls[order[i + 1]]), int(ordered[i])
            raise BackendCheckFailed(
                "mapping", f"SWA slot {s} is mapped from two full slots{where}: {a} ({_holders(torch, rows, a)}) "
                f"and {b} ({_holders(torch, rows, b)})")
