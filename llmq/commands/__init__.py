"""One module per ``llmq`` command; each has ``add_parser(subparsers)`` and ``run(args) -> int``."""
