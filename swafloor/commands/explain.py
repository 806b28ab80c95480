"""``swafloor explain``: a picture of one SWA life cycle's blocks at a history, as text or SVG; or,
with ``--trace``, a saved trace's steps replayed on the reference manager, one row per step. The
pictures themselves are :mod:`swafloor.picture` (the model and its text) and :mod:`swafloor.svg`.
"""

from __future__ import annotations

from .. import picture as pictures

from ._common import int_at_least, print_json, writable_file


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "explain", help="picture the blocks a window holds at a history (text or SVG), or a trace's steps"
    )
    p.add_argument("--window", type=int_at_least(1), default=None, help="window W in tokens (sinks excluded)")
    p.add_argument("--tokens-per-block", type=int_at_least(1), default=None, help="tokens per block t")
    p.add_argument("--sink-tokens", type=int_at_least(0), default=0, help="sink tokens (default 0)")
    p.add_argument("--history", type=int_at_least(0), default=None, help="history h (default: a worst case)")
    p.add_argument("--step-tokens", type=int_at_least(1), default=1,
                   help="tokens the step computes: capacity h + N (default 1, a decode step)")
    p.add_argument("--in-flight", type=int_at_least(0), default=0, metavar="K",
                   help="k tokens in flight: blocks are freed on history h - k (default 0)")
    p.add_argument("--release-order", choices=("release-first", "hold-until-return"), default="release-first",
                   help="hold-until-return: the step's resize also advanced history from h - 1 and keeps the "
                        "blocks it made stale until it returns")
    p.add_argument("--first-resume", action="store_true",
                   help="the first resume of a request reusing h committed tokens (capacity h), with the "
                        "private copy of a partially filled last block")
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="instead: replay a saved trace on the reference manager, one row per step")
    p.add_argument("--backend", default=None, metavar="NAME|MODULE:FACTORY",
                   help="with --trace: also run the steps on this backend and show its outcomes and slots")
    p.add_argument("--svg", type=writable_file, default=None, metavar="FILE", help="also write the picture as SVG to FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


# ----------------------------------------------------------------------------- the command
def run(args) -> int:
    from ..cli import UsageError

    if args.trace is not None:
        from swafloor.fuzz.protocol import Unsupported
        from swafloor.fuzz.trace import TraceError

        try:
            tr = pictures.trace_rows(args.trace, args.backend)
        except (TraceError, Unsupported) as exc:
            raise UsageError(f"swafloor explain: --trace: {exc}") from None
        except OSError as exc:
            raise UsageError(f"swafloor explain: --trace: cannot read {args.trace!r}: {exc.strerror}") from None
        return _show(args, tr, "trace_svg", pictures.render_trace_text)
    for name in ("window", "tokens_per_block"):
        if getattr(args, name) is None:
            raise UsageError(f"swafloor explain: the following arguments are required: --{name.replace('_', '-')}"
                             " (or --trace FILE)")
    t, w = args.tokens_per_block, args.window
    hold = args.release_order == "hold-until-return"
    h = args.history
    if h is None:  # a history where this kind of step holds the most blocks
        h = pictures.worst_history(w, t, args.sink_tokens, args.in_flight, hold, args.first_resume)
    pic = pictures.picture(w, t, args.sink_tokens, h, args.step_tokens, args.in_flight, hold,
                           args.first_resume)
    return _show(args, pic, "block_svg", pictures.render_text)


def _show(args, model: dict, drawing: str, render) -> int:
    """Write the picture ``model`` as SVG (``svg.<drawing>``) when asked, then print it (JSON or text)."""
    if args.svg:
        from .. import svg

        svg.write(args.svg, getattr(svg, drawing)(model))
    if args.json:
        print_json(model)
    else:
        print("\n".join(render(model)))
    return 0
