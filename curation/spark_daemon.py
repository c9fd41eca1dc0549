"""The extract job's Spark daemon: the default config's stages built before workers are forked.

`spark.python.daemon.module` names this module for every session the extract job starts
(curation/pipeline.py's `SPARK_CONF`, which names it as a string so that the pipeline never imports
the daemon that imports it; core/runner.py), so each executor builds the default config's plan once
(`plan_for`: trafilatura and lxml imported, lid.176 loaded, spaCy's tokenizer and numba's n-gram
kernels ready) and every Python worker forked from it starts with that done, instead of paying
~1.7 s each (core/spark_daemon.py says how, and when it falls back to Spark's plain daemon). A job
with another config still finds the modules, the model and the compiled kernels loaded, and builds
only its own stage objects. The daemon holds ~250 MB per executor, which its workers share: each
worker's PSS drops by ~140 MB (docs/extract.md has the measurement).
`--spark-conf spark.python.daemon.module=pyspark.daemon` turns it off.
"""

from __future__ import annotations

MODULE = "curation.spark_daemon"


def preload() -> None:
    from curation.config import ExtractJobConfig
    from curation.pipeline import plan_for

    plan_for(ExtractJobConfig())


if __name__ == "__main__":
    from core.spark_daemon import serve

    serve(preload, MODULE)
