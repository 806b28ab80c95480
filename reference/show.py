"""Bounded, one-line renderings of arbitrary values for error messages.

``repr`` is not safe to call on untrusted input: a 5000-digit int raises ValueError, a deeply
nested list raises RecursionError, a 10 MB string makes a 10 MB message. :func:`bounded` never
raises, never recurses deeper than a few levels, never returns more than ``limit`` characters and
never returns a line break (strings are quoted with ``repr``, so a newline shows as ``\\n``).
"""

from __future__ import annotations

_MAX_DEPTH = 4
_EXACT_DIGITS_BITS = 1 << 16  # count digits exactly below this many bits, estimate above
_PLAIN_INT_BITS = 200  # about 60 digits: show such ints in full


def bounded(value: object, limit: int = 80) -> str:
    """A one-line rendering of ``value`` of at most ``limit`` characters (``limit`` >= 8)."""
    limit = max(int(limit), 8)
    try:
        text = _render(value, limit, 0)
    except Exception:  # a hostile __repr__ or __len__; never let a message crash
        text = _opaque(value)
    text = text.replace("\n", "\\n").replace("\r", "\\r")
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def one_line(message: object, limit: int = 160) -> str:
    """A message (``str(message)``, unquoted, unlike :func:`bounded`) as one line of at most ``limit``
    characters: line breaks shown as ``\\n`` and ``\\r``, the rest cut to ``...``."""
    text = str(message).replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _opaque(value: object) -> str:
    try:
        return f"<{type(value).__name__}>"
    except Exception:
        return "<object>"


def _int_text(value: int) -> str:
    bits = value.bit_length()
    if bits <= _PLAIN_INT_BITS:
        return str(value)
    sign = "-" if value < 0 else ""
    estimate = int((bits - 1) * 0.30102999566398120) + 1
    if bits <= _EXACT_DIGITS_BITS:
        magnitude = -value if value < 0 else value
        digits = estimate
        while magnitude >= 10**digits:
            digits += 1
        while digits > 1 and magnitude < 10 ** (digits - 1):
            digits -= 1
        return f"{sign}<int of {digits:,} digits>"
    return f"{sign}<int of about {estimate:,} digits>"


def _render(value: object, budget: int, depth: int) -> str:
    kind = type(value)
    if value is None or kind is bool:
        return repr(value)
    if kind is int:
        return _int_text(value)  # type: ignore[arg-type]
    if kind is float:
        return repr(value)
    if kind is str or kind is bytes:
        text = value[: budget + 1]  # type: ignore[index]
        shown = repr(text)
        if len(value) > budget:  # type: ignore[arg-type]
            shown = repr(text[:budget]) + f"...({len(value):,} long)"  # type: ignore[arg-type]
        return shown
    if kind in (list, tuple, set, frozenset, dict):
        return _render_container(value, budget, depth)
    text = repr(value)
    if len(text) > budget:
        text = text[:budget] + "..."
    return text


_BRACKETS = {list: "[]", tuple: "()", set: "{}", frozenset: "frozenset({})", dict: "{}"}


def _render_container(value, budget: int, depth: int) -> str:
    opening, closing = _BRACKETS[type(value)][:-1], _BRACKETS[type(value)][-1]
    if type(value) is frozenset:
        opening, closing = "frozenset({", "})"
    if len(value) == 0:
        return "frozenset()" if type(value) is frozenset else ("set()" if type(value) is set else opening + closing)
    if depth >= _MAX_DEPTH:
        return f"{opening}...{closing}"
    parts: list[str] = []
    used = len(opening) + len(closing)
    items = value.items() if type(value) is dict else value
    for index, item in enumerate(items):
        if used > budget:
            parts.append(f"... {len(value) - index:,} more")
            break
        if type(value) is dict:
            key, val = item
            part = _render(key, budget, depth + 1) + ": " + _render(val, budget, depth + 1)
        else:
            part = _render(item, budget, depth + 1)
        parts.append(part)
        used += len(part) + 2
    if type(value) is tuple and len(value) == 1:
        return f"({parts[0]},)"
    return opening + ", ".join(parts) + closing
