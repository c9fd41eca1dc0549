"""Benchmarks: each module of a subpackage is one command, run from the checkout's root as
`python -m bench.<package>.<name> --help` (docs/benchmarks.md lists them and where their numbers are).

bench.harness holds what several benches share: the process-tree clock (wall and CPU, children
included), the kept-set agreement and the table printer. Not shipped in the wheel; no runtime package
imports it (lint-imports). What bench shares with the tests is in testkit/."""
