"""Extraction driven by an index: the cc-index table of local WARCs (`ccindex`), `--where` conditions
over its columns (`where`), ranged reads of the selected records (`fetch`), and the job that plans
and runs them (`job`, `extract --index`)."""
