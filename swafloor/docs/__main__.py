"""``python -m swafloor.docs [build] [--check]``: the same as ``swafloor docs build``."""

import sys

from ..cli import main

if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] != ["build"]:
        argv = ["build", *argv]
    raise SystemExit(main(["docs", *argv]))
