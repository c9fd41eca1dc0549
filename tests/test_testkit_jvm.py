"""The suite's JVM options (testkit/jvm.py) take: a Spark session's JVM maps the class archive the
pytest controller wrote, and loads most of Spark's classes from it rather than from the jars."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from testkit.jvm import C1_ONLY, spark_class_archive
from testkit.shared_data import REPO_ROOT

pytestmark = pytest.mark.spark


def test_a_spark_jvm_loads_its_classes_from_the_suites_archive(tmp_path):
    opts = os.environ["JDK_JAVA_OPTIONS"]  # tests/conftest.py's pytest_configure set it
    archive = spark_class_archive(REPO_ROOT)
    assert archive is not None and f"-XX:SharedArchiveFile={archive}" in opts and C1_ONLY in opts
    env = {**os.environ, "JDK_JAVA_OPTIONS": f"{opts} -Xlog:class+load=info:file={tmp_path}/load-%p.log"}
    job = "from core.spark import get_spark; s = get_spark('local[1]', 't', {}); s.range(3).count(); s.stop()"
    res = subprocess.run([sys.executable, "-c", job], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    # the session's JVM is the one that loaded the most classes (spark-submit's launcher JVM loads ~700)
    lines = max((p.read_text().splitlines() for p in tmp_path.glob("load-*.log")), key=len)
    from_archive = sum("shared objects file (top)" in ln for ln in lines)
    from_jars = sum("source: file:" in ln or "source: jar:" in ln for ln in lines)
    # measured: ~11,700 of ~17,000 classes from the archive, ~400 from jars (generated ones the rest)
    assert from_archive > 10 * from_jars and from_archive > 5000, (from_archive, from_jars, len(lines))
