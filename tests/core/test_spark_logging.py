"""A job's Spark starts quietly: core/log4j2.properties reaches the driver JVM before it logs anything.

Spark falls back to its built-in log4j profile at INFO and says so ("Using Spark's default log4j
profile", "Setting default log level ...") before any `setLogLevel` can run, and Hadoop adds its
native-library notice; these opened every job's output.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.spark import LOG4J2_CONF, quiet_driver_logging
from testkit.shared_data import REPO_ROOT

OPT = f"-Dlog4j2.configurationFile={LOG4J2_CONF.as_uri()}"


def test_the_file_is_put_first_and_a_users_options_kept():
    assert quiet_driver_logging({}) == {"spark.driver.extraJavaOptions": OPT}
    user = {
        "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/mine.properties -Xss4m",
        "x": "1",
    }
    # the user's own file comes later on the java command line, so it wins
    assert quiet_driver_logging(user) == {
        **user,
        "spark.driver.extraJavaOptions": f"{OPT} {user['spark.driver.extraJavaOptions']}",
    }
    lines = dict(
        line.split(" = ", 1)
        for line in LOG4J2_CONF.read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert lines["rootLogger.level"] == "warn" and lines["appender.console.target"] == "SYSTEM_ERR"


@pytest.mark.spark
def test_a_session_starts_without_spark_banners():
    code = (
        "from core.spark import get_spark\n"
        "s = get_spark('local[1]', 'quiet')\n"
        "assert s.sparkContext.parallelize([1, 2]).sum() == 3\n"
        "s.stop()\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    for banner in ("default log4j profile", "Setting default log level", "NativeCodeLoader", " INFO "):
        assert banner not in run.stderr, run.stderr[-2000:]
