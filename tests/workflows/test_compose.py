"""docker-compose.yml: valid against the Compose spec, up to date, and running the cluster test's commands.

No Docker engine runs here, so the file is checked statically: against the Compose specification's
JSON schema (shared data, compose-spec @170098ba), against its generator workflows/compose.py (a stale
file fails), and for the properties the deployment promises (auth on with the secret from the
environment, only the master UI published and only on loopback, a GPU reservation for `train`).
The `curate` commands are compared with the `Step`s of workflows/pipeline.py, the same steps
tests/cluster/test_cluster.py submits to a real standalone cluster.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from trainer.launch import LAUNCHER_MODULE, TRAIN_MODULE
from workflows import compose as gen
from workflows.pipeline import Layout, curation_steps, pipeline

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec(data_dir: Path) -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_validates_against_compose_schema(spec, data_dir):
    import jsonschema

    schema = json.loads((data_dir / "schemas" / "compose-spec.json").read_text())
    jsonschema.validate(spec, schema, cls=jsonschema.Draft7Validator)


def test_schema_rejects_a_broken_file(data_dir):
    """The validation above can fail: a misspelt key is refused by the same schema."""
    import jsonschema

    schema = json.loads((data_dir / "schemas" / "compose-spec.json").read_text())
    bad = gen.compose()
    bad["services"]["curate"]["comand"] = bad["services"]["curate"].pop("command")
    with pytest.raises(jsonschema.ValidationError, match="comand"):
        jsonschema.validate(bad, schema, cls=jsonschema.Draft7Validator)


def test_file_is_generated_from_the_pipeline_definition():
    assert (ROOT / "docker-compose.yml").read_text() == gen.render(), (
        "docker-compose.yml is stale: run `.venv/bin/python -m workflows compose`"
    )


def test_curate_runs_the_pipeline_steps(spec):
    """Each curate line is a pipeline Step: spark-submit for Spark steps, in pipeline order."""
    cmd = spec["services"]["curate"]["command"]
    assert cmd[:2] == ["bash", "-euxc"]
    lines = [shlex.split(line) for line in cmd[2].splitlines()]
    steps = pipeline(gen.compose_layout(), ROOT / gen.RECIPE)
    assert len(lines) == len(steps) + 1  # + the mixtures plan
    for line, step in zip(lines, steps):
        if step.spark:
            assert line[:3] == ["spark-submit", "--master", gen.MASTER], step.name
            entry = line.index(f"{step.module}/__main__.py")
            assert tuple(line[entry + 1 :]) == step.args, step.name
        else:
            assert line == ["python", "-m", step.module, *step.args], step.name
    assert lines[-1][:4] == ["python", "-m", "mixtures", "plan"]
    names = [s.name for s in steps]
    assert names[:5] == ["extract", "dedup", "train-quality", "train-lm", "score"]
    assert {"tokenize:web", "tokenize:web_hq"} <= set(names)


def test_same_steps_as_the_cluster_test(tmp_path):
    """The cluster test builds its steps with the same functions; only the paths differ."""
    here = Layout(warcs=("/w/a.warc.gz",), out=str(tmp_path), shared_data="/s", quality_model="/m")
    there = Layout(warcs=("/w/a.warc.gz",), out=gen.OUT, shared_data="/s", quality_model="/m")

    def shape(steps, out):
        return [(s.name, s.module, tuple(a.replace(out, "<OUT>") for a in s.args)) for s in steps]

    assert shape(curation_steps(here), str(tmp_path)) == shape(curation_steps(there), gen.OUT)


def test_deployment_properties(spec):
    services = spec["services"]
    assert {"spark-master", "spark-worker-1", "spark-worker-2", "curate", "train"} <= set(services)
    published = {name: s["ports"] for name, s in services.items() if s.get("ports")}
    assert published == {"spark-master": ["127.0.0.1:8080:8080"]}
    for name, s in services.items():
        assert s["networks"] == ["refinery"], name
        env = " ".join(str(v) for v in s.get("environment", {}).values())
        if name != "train":
            # Auth on everywhere Spark runs; the secret only as a required variable, never a literal.
            assert "-Dspark.authenticate=true" in env, name
            assert re.search(r"spark\.authenticate\.secret=\$\{SPARK_AUTH_SECRET:\?", env), name
    train = services["train"]
    devices = train["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    # the one launch form (trainer/launch.py): the launcher's module, the trainer as a module, no
    # --num_gpus (every GPU the reservation gives)
    assert train["command"][:5] == ["python", "-m", LAUNCHER_MODULE, "--module", TRAIN_MODULE]
    assert "--num_gpus" not in train["command"]
    assert train["depends_on"]["curate"]["condition"] == "service_completed_successfully"


def test_dockerfile_pins(tmp_path):
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11\.\d+-", text, re.M), "pin the Python patch release"
    assert "openjdk-17-jre-headless" in text
    assert "pip install '.[train]'" in text  # pyspark comes pinned from pyproject.toml
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "out", ".git"} <= set(ignore)


def _copied(dockerfile: str) -> list[tuple[str, str]]:
    """The Dockerfile's `COPY src dest` pairs (one source each, as this Dockerfile writes them)."""
    pairs = []
    for line in dockerfile.splitlines():
        words = line.split()
        if words[:1] == ["COPY"]:
            assert len(words) == 3 and not words[1].startswith("--"), f"one source per COPY: {line}"
            pairs.append((words[1], words[2]))
    return pairs


def test_the_image_holds_what_every_service_runs(spec):
    """No Docker engine runs here, so the build is checked by structure (issue 55: the image copied a
    `scripts/` folder that did not exist and never copied `workflows/`): every COPY source exists in the
    build context (and is not left out by .dockerignore); every module a service starts with `python -m`,
    every script `spark-submit` is given, every package `--module` names and every repository file a
    command reads (configs/, mixtures/) is inside something the image copies; and `pip install .` sees
    every package pyproject.toml installs."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    ignored = set((ROOT / ".dockerignore").read_text().split())
    copied = []
    for src, _dest in _copied(dockerfile):
        assert (ROOT / src).exists(), f"COPY {src}: no such file or folder in the build context"
        assert src.rstrip("/") not in ignored, f"COPY {src}: left out of the context by .dockerignore"
        copied.append(src.rstrip("/").removeprefix("./"))

    def in_image(rel: str) -> bool:
        return any(rel == c or rel.startswith(c + "/") for c in copied)

    needed = set()
    for name, service in spec["services"].items():
        command = service.get("command", [])
        words = [
            w for part in command for w in (shlex.split(part) if "\n" in part or " " in part else [part])
        ]
        for i, w in enumerate(words):
            if w in ("-m", "--module") and i + 1 < len(words):
                needed.add((name, words[i + 1].split(".")[0]))
            elif re.fullmatch(r"[a-z_]+/[\w/.-]+\.(py|yaml)", w):
                needed.add((name, w))
    assert {n for _, n in needed} >= {"workflows", "classifiers", "trainer", "curation/__main__.py"}
    for service, rel in sorted(needed):
        if "/" in rel:
            assert (ROOT / rel).is_file(), f"service {service} names {rel}, which is not in the repository"
            assert in_image(rel), f"service {service} runs {rel}, which the Dockerfile does not copy"
        elif rel in ("deepspeed",):  # installed by pip into the image, not a folder of ours
            continue
        else:
            assert in_image(rel), f"service {service} runs `-m {rel}`, which the Dockerfile does not copy"
    # pip installs what setuptools finds in the context at that point: every package must be copied before it
    pip_at = dockerfile.index("RUN pip install")
    before = [s.rstrip("/").removeprefix("./") for s, _ in _copied(dockerfile[:pip_at])]
    import tomllib

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for pattern in include["include"]:
        assert pattern.rstrip("*") in before, f"package {pattern} is not copied before `pip install`"
