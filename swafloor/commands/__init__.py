"""One module per ``swafloor`` subcommand; each defines ``register(subparsers)``."""
