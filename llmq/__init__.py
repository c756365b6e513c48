"""The ``llmq`` command line: one entry point over :mod:`theory`, :mod:`stability` and
:mod:`paper_checks` (see ``llmq --help``)."""
