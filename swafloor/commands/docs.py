"""``swafloor docs build``: regenerate every generated page, section, transcript and picture of the
docs from the code (see :mod:`swafloor.docs`). ``--check`` writes nothing and exits 1 when a
committed file differs from what the build makes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ._common import print_json


def register(subparsers) -> None:
    p = subparsers.add_parser("docs", help="regenerate the generated docs and pictures (swafloor docs build)")
    p.add_argument("action", choices=("build",), help="build: regenerate (the only action)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    p.add_argument("--root", default=None, metavar="DIR", help="the repository (default: this checkout)")
    p.add_argument("--only", action="append", default=[], metavar="PAGE",
                   help="only this page, relative to the root (repeatable)")
    p.add_argument("--no-theorems", action="store_true", help="skip proving the catalogue for theorems.md")
    p.add_argument("--no-measured", action="store_true",
                   help="leave measured transcripts (timings of long runs) as they are")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def run(args) -> int:
    from ..cli import UsageError
    from ..docs import build, repository_root
    from ..docs.markdown import DocsError

    root = Path(args.root).resolve() if args.root else repository_root()
    if not (root / "docs").is_dir():
        raise UsageError(f"swafloor docs: --root {str(root)[:200]!r} has no docs/ folder")
    started = time.perf_counter()
    try:
        result = build(root, check=args.check, theorems=not args.no_theorems, only=tuple(args.only),
                       measured=not args.no_measured)
    except DocsError as exc:
        raise UsageError(f"swafloor docs: {exc}") from None
    seconds = time.perf_counter() - started
    if args.json:
        print_json({"root": str(root), "check": args.check, "files": sorted(result.files),
                    "changed": list(result.changed), "seconds": round(seconds, 1)})
    else:
        verb = "out of date" if args.check else "written"
        print(f"docs: {len(result.files)} files made in {seconds:.1f} s; {len(result.changed)} {verb}")
        for rel in result.changed:
            print(f"  {rel}")
    if args.check and result.changed:
        print("swafloor docs: out of date; run: swafloor docs build", file=sys.stderr)
        return 1
    return 0
