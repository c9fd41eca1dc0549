"""core.spark.SparkOptions: built once from the command line, passed to every job whole."""

from __future__ import annotations

import argparse

import pytest

from core.cli import add_spark_args
from core.errors import ConfigError
from core.spark import SparkOptions


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_spark_args(p)
    return p.parse_args(argv)


def test_from_args_reads_the_three_spark_arguments():
    args = _parse(["--master", "local[2]", "--spark-conf", "a.b=1", "--spark-conf", "c=x=y", "--no-progress"])
    assert SparkOptions.from_args(args) == SparkOptions("local[2]", {"a.b": "1", "c": "x=y"}, progress=False)
    assert SparkOptions.from_args(_parse([])) == SparkOptions()
    with pytest.raises(ConfigError, match="--spark-conf expects KEY=VALUE"):
        SparkOptions.from_args(_parse(["--spark-conf", "novalue"]))


def test_options_are_frozen_down_to_the_conf():
    conf = {"k": "v"}
    opts = SparkOptions(conf=conf)
    conf["k"] = "changed"  # the caller's dict is copied
    assert opts.conf == {"k": "v"}
    with pytest.raises(TypeError):
        opts.conf["k"] = "w"
    with pytest.raises(AttributeError):
        opts.master = "local"
