"""The `cluster` tier: the curation jobs on a real Spark standalone cluster (tests/cluster/conftest.py)."""
