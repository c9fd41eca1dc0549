#!/usr/bin/env bash
# The wheels issue 14's GPU checks need on the lent GPU machine, downloaded here into .whl/ (git-ignored).
#
#     bash bench/gpu/wheels.sh          # after `make install` (DeepSpeed's wheel is built then, in pip's cache)
#
# That machine (the lent GPU machine: Python 3.12, torch 2.11 + Triton 3.6, no network) has numpy, PyYAML,
# tqdm, psutil, py-cpuinfo, msgpack, ninja, einops, packaging, safetensors, tensorboard and tokenizers; it
# lacks what the trainer, its tests and the two benches import besides: pydantic (core/config.py) with its
# parts, DeepSpeed with hjson, and Liger-Kernel (bench/trainer/kernels.py's peer column). The versions are this
# project's pins (pyproject.toml, the venv's), for Python 3.12 on manylinux x86-64; DeepSpeed is pure Python
# (one py3-none-any wheel, built from its sdist: none is on the index). bench/gpu/checks.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/../.."
PIP=.venv/bin/pip
test -x "$PIP" || { echo "run 'make install' first (the pins come from .venv)" >&2; exit 2; }
pin() { "$PIP" freeze 2>/dev/null | grep -i "^$1==" || { echo "$1 is not installed in .venv" >&2; exit 2; }; }
mkdir -p .whl
rm -f .whl/*.whl
"$PIP" download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    "$(pin pydantic)" "$(pin pydantic_core)" "$(pin annotated-types)" "$(pin typing-inspection)" \
    "$(pin typing_extensions)" "$(pin hjson)" liger-kernel==0.8.5
ds=$(pin deepspeed)
cached=$(find "${PIP_CACHE_DIR:-$HOME/.cache/pip}" -name "deepspeed-${ds#*==}-py3-none-any.whl" 2>/dev/null | head -1)
if [ -n "$cached" ]; then
    cp "$cached" .whl/
else  # its setup.py imports torch: build against the venv's, without pip's isolated build environment
    "$PIP" wheel --quiet --no-deps --no-build-isolation -w .whl "$ds"
fi
ls -l .whl
du -sh .whl
