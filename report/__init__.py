"""The run report of a demo (or any pipeline run laid out like one): `python -m report --demo-dir DIR`.

`collect.py` reads the numbers every stage already wrote (stats.json of extract / dedup / score, the
token manifests, the recipe's plan, the trainer's metrics.jsonl, the driver's timings.json) into one
`report.json`; `render.py` draws PNG charts from that JSON only and writes `report.html`. So every
number a chart shows is in report.json, and every number in report.json is read, not recomputed,
from a stats file (tests/report/test_report.py checks both). `browse.py` writes browse.html beside it: the
documents behind those numbers (sampled drops per stage and reason, duplicate clusters, score ranges,
selector thresholds), one self-contained page that makes no request.
"""
