"""Generates docker-compose.yml from workflows/pipeline.py: `python -m workflows compose [--check]`.

The `curate` service's commands are rendered from the same `Step`s the cluster tests submit (with the
container's paths and master), so the two cannot drift: tests/workflows/test_compose.py regenerates the
file and fails if the committed one differs, validates it against the Compose specification's JSON
schema, and compares the commands it holds with the steps. (tests/workflows/test_compose.py)

Services (one image, built by ./Dockerfile, all on the `refinery` network):
- spark-master, spark-worker-1, spark-worker-2: a standalone cluster; only the master's web UI is
  published, on 127.0.0.1:8080. Shared-secret authentication is on: the secret comes from the host's
  SPARK_AUTH_SECRET (compose refuses to start without it) through SPARK_DAEMON_JAVA_OPTS (daemons)
  and SPARK_SUBMIT_OPTS (spark-submit reads `-Dspark.*` properties as Spark settings); executors get
  it from their worker. It is never written into the file or a service command.
- curate: extract → dedup → train-quality (unless QUALITY_MODEL is set at generation time) → score →
  train-tokenizer → tokenize per recipe source → mixtures plan, Spark steps through spark-submit.
- train: the DeepSpeed launcher (trainer/launch.py's command) on every GPU of the host (a GPU
  reservation), after curate succeeds.

Data: the WARCs and the shared data folder are mounted read-only at /shared/data (host folder from
REFINERY_SHARED_DATA, default ../shared/data); every output goes to the `refinery-out` volume mounted
at /refinery/out on the workers, curate and train alike, because Spark tasks write their own files.
"""

from __future__ import annotations

import argparse

from trainer.launch import launch_command
from workflows.paths import PROJECT_ROOT as ROOT
from workflows.pipeline import Layout, Step, pipeline, plan_step, shell

COMPOSE_FILE = ROOT / "docker-compose.yml"
APP = "/refinery"  # the project inside the image (Dockerfile WORKDIR)
OUT = f"{APP}/out/demo"  # mixtures/demo.yaml names its sources as ../out/demo/... relative to itself
SHARED = "/shared/data"
MASTER = "spark://spark-master:7077"
RECIPE = "mixtures/demo.yaml"
AUTH_OPTS = (
    "-Dspark.authenticate=true -Dspark.authenticate.secret=${SPARK_AUTH_SECRET:?set SPARK_AUTH_SECRET}"
)
# Per executor; two workers of 2 cores / 6 GB each. Raise with the host.
SUBMIT_CONF = {"spark.executor.memory": "4g", "spark.executor.cores": "2"}


def compose_layout() -> Layout:
    return Layout(
        warcs=(f"{SHARED}/warc/*.warc.gz",),
        out=OUT,
        shared_data=SHARED,
    )


def compose_steps() -> list[Step]:
    return pipeline(compose_layout(), ROOT / RECIPE)


def curate_commands() -> list[list[str]]:
    """The curate service's commands, in order: spark-submit for Spark steps, plain python otherwise."""
    cmds = [
        s.submit(MASTER, "spark-submit", SUBMIT_CONF) if s.spark else s.local("python")
        for s in compose_steps()
    ]
    cmds.append(plan_step(RECIPE, OUT).local("python"))
    return cmds


def curate_script() -> str:
    # Relative recipe paths in the steps are rewritten to the in-image one (pipeline() got the host path).
    host_recipe = str(ROOT / RECIPE)
    lines = [shell([a.replace(host_recipe, RECIPE) for a in c]) for c in curate_commands()]
    return "\n".join(lines)


def _spark_service(command: list[str], extra: dict | None = None) -> dict:
    svc = {
        "image": "refinery:latest",
        "build": {"context": "."},
        "command": command,
        "environment": {"SPARK_DAEMON_JAVA_OPTS": AUTH_OPTS},
        "networks": ["refinery"],
        "volumes": ["refinery-out:/refinery/out", "${REFINERY_SHARED_DATA:-../shared/data}:/shared/data:ro"],
        "restart": "unless-stopped",
    }
    svc.update(extra or {})
    return svc


def compose() -> dict:
    worker = [
        "spark-class",
        "org.apache.spark.deploy.worker.Worker",
        "--cores",
        "2",
        "--memory",
        "6g",
        MASTER,
    ]
    services = {
        "spark-master": _spark_service(
            [
                "spark-class",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "spark-master",
                "--port",
                "7077",
                "--webui-port",
                "8080",
            ],
            {
                # Only the master's UI leaves the compose network, and only on the host's loopback.
                "ports": ["127.0.0.1:8080:8080"],
            },
        ),
        "spark-worker-1": _spark_service(list(worker), {"depends_on": ["spark-master"]}),
        "spark-worker-2": _spark_service(list(worker), {"depends_on": ["spark-master"]}),
        "curate": {
            "image": "refinery:latest",
            "build": {"context": "."},
            "command": ["bash", "-euxc", curate_script()],
            "environment": {"SPARK_SUBMIT_OPTS": AUTH_OPTS},
            "networks": ["refinery"],
            "volumes": [
                "refinery-out:/refinery/out",
                "${REFINERY_SHARED_DATA:-../shared/data}:/shared/data:ro",
            ],
            "depends_on": ["spark-master", "spark-worker-1", "spark-worker-2"],
        },
        "train": {
            "image": "refinery:latest",
            "build": {"context": "."},
            # No --num_gpus: the launcher uses every GPU the reservation gives the container; its
            # default rendezvous port, since the container runs one training.
            "command": launch_command("configs/train-debug.yaml", python="python", master_port=None),
            "networks": ["refinery"],
            "volumes": ["refinery-out:/refinery/out"],
            "ipc": "host",  # NCCL and the data loader need more shared memory than Docker's 64 MB default
            "depends_on": {"curate": {"condition": "service_completed_successfully"}},
            "deploy": {
                "resources": {
                    "reservations": {
                        "devices": [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
                    }
                }
            },
        },
    }
    return {
        "name": "refinery",
        "services": services,
        "networks": {"refinery": {}},
        "volumes": {"refinery-out": {}},
    }


def render() -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        """Literal blocks for the multi-line curate script; no &anchors for repeated lists."""

        def ignore_aliases(self, data):
            return True

    def _str(dumper, data):
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(str, _str)

    header = (
        "# Generated by workflows/compose.py from workflows/pipeline.py; edit those, then run\n"
        "#   .venv/bin/python -m workflows compose\n"
        "# Start: SPARK_AUTH_SECRET=$(openssl rand -hex 32) docker compose up --build\n"
        "# Spark master UI: http://127.0.0.1:8080 (the only published port).\n"
    )
    return header + yaml.dump(compose(), Dumper=Dumper, sort_keys=False, width=110, default_flow_style=False)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--check", action="store_true", help="exit 1 if docker-compose.yml is not up to date")


def run(args: argparse.Namespace) -> int:
    text = render()
    if args.check:
        same = COMPOSE_FILE.exists() and COMPOSE_FILE.read_text() == text
        print(
            "docker-compose.yml is up to date"
            if same
            else "docker-compose.yml is stale: run `python -m workflows compose`"
        )
        return 0 if same else 1
    COMPOSE_FILE.write_text(text)
    print(f"wrote {COMPOSE_FILE}")
    return 0
