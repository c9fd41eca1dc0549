"""Who can reach an embedded Spark (core/spark.py): loopback only, and no web UI unless asked for.

Spark's defaults listen on every interface without authentication (driver RPC, BlockManager, the UI
on :4040). Each case starts the driver the way every command does (`get_spark`) in a subprocess,
then lists the TCP sockets the JVM and its Python workers listen on, from /proc (Linux).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.spark import is_local_master

REPO = Path(__file__).resolve().parents[2]

# Run in a child: get_spark configures the process's one JVM, which the suite's own session owns.
_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from core.spark import get_spark, parse_spark_conf
    spark = get_spark(sys.argv[1] or None, "binding-test", parse_spark_conf(sys.argv[2:]))
    spark.range(10).count()  # executors and the BlockManager are up
    pid = spark.sparkContext._gateway.proc.pid
    print(json.dumps({"pid": pid, "ui": spark.sparkContext.uiWebUrl}))
    sys.stdout.flush()
    sys.stdin.readline()  # the parent reads the sockets, then lets us stop
    spark.stop()
    """
)


def _listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket process `pid` listens on, from /proc/net/tcp{,6}."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table, v6 in (("tcp", False), ("tcp6", True)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] != "0A" or f[9] not in inodes:  # 0A: LISTEN
                continue
            addr_hex, port_hex = f[1].split(":")
            raw = bytes.fromhex(addr_hex)
            if v6:  # four little-endian 32-bit words
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                addr = str(ipaddress.IPv6Address(raw))
            else:
                addr = ".".join(str(b) for b in raw[::-1])
            out.append((addr, int(port_hex, 16)))
    return out


def _start(master: str, *conf: str) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPARK_LOCAL_IP", None)  # what a user's shell has: nothing
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, master, *conf],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail(f"the Spark child exited with {proc.wait()}")
    return proc, json.loads(line)


def _stop(proc: subprocess.Popen) -> None:
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.wait(timeout=60) == 0


def _exposed(sockets: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The sockets not on a loopback address (an IPv4-mapped IPv6 loopback counts as loopback)."""
    out = []
    for addr, port in sockets:
        ip = ipaddress.ip_address(addr)
        ip = getattr(ip, "ipv4_mapped", None) or ip
        if not ip.is_loopback:
            out.append((addr, port))
    return out


@pytest.mark.spark
@pytest.mark.security
@pytest.mark.parametrize("master", [""])  # the CLI default: local[*]
def test_embedded_spark_listens_on_loopback_only_and_serves_no_ui(master):
    proc, info = _start(master)
    try:
        sockets = _listening(info["pid"])
    finally:
        _stop(proc)
    # driver RPC and BlockManager at least (py4j's gateway is loopback already)
    assert len(sockets) >= 2, sockets
    assert _exposed(sockets) == [], sockets
    assert info["ui"] is None  # no UI object at all, so nothing serves on 4040+
    assert 4040 not in {port for _, port in sockets}


@pytest.mark.spark
@pytest.mark.security
def test_a_ui_asked_for_is_served_on_loopback_and_a_users_setting_wins():
    proc, info = _start("local[1]", "spark.ui.enabled=true", "spark.ui.port=0")
    try:
        sockets = _listening(info["pid"])
    finally:
        _stop(proc)
    assert info["ui"] is not None
    ui_port = int(info["ui"].rsplit(":", 1)[1])
    assert ui_port in {port for _, port in sockets}
    assert _exposed(sockets) == [], sockets


@pytest.mark.security
def test_only_local_masters_are_bound_to_loopback(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert is_local_master(None) and is_local_master("local[*]") and is_local_master("local-cluster[2,1,512]")
    # a cluster's executors must reach the driver: those keep Spark's binding, behind spark.authenticate
    assert not is_local_master("spark://10.0.0.5:7077") and not is_local_master("yarn")
    assert not is_local_master("k8s://https://api:6443")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # under spark-submit, its master decides
    assert not is_local_master(None)
