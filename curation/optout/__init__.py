"""Content owners' opt-outs: robots.txt per RFC 9309 with the deciding line (`robots`), and what a
capture's HTTP status and redirects mean for it (`capture`).

The matcher is Refinery's own: Python 3.11's urllib.robotparser, Protego 0.7.0 and robotspy 0.13 each
fail cases of RFC 9309 / Google's conformance tests or cannot say which rule decided
(../shared/research/optout-2026.md §4.2); an audit row needs the line. docs/optout.md has the semantics.
"""
