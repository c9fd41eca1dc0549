#!/usr/bin/env bash
# Issue 14's GPU checks in one command on the lent GPU machine, with the wheels of bench/gpu/wheels.sh:
#
#     device run, carry [".whl"]:  bash bench/gpu/checks.sh [PART[,PART...]|all|quick]
#     e.g. TESTS="tests/trainer/test_model.py" LIMIT=120 bash bench/gpu/checks.sh tests,zero3
#
# Installs the carried wheels into /tmp/site (pip --target: the machine's own torch and Triton stay), then
# runs, each part's output in $OUT/<part>.log (what comes back from the machine):
#   tests    the tests in $TESTS, by default the trainer tests that need neither ../shared nor Spark (kernels,
#            model, backend, the kernels bench's smoke test, trainer units, ZeRO planning, checkpoint safety),
#            CUDA cases included;
#   kernels  bench/trainer/kernels.py (ours vs eager, torch.compile and Liger at the 124m / 1b / 8b shapes);
#   124m       bench/trainer/throughput.py --model 124m --data synthetic --steps 40 (0.5M-token steps, about
#              1 s each on an H100), the rows the targets name: default, z3, z1, z0 and the ceiling;
#   124m-more  the same with the other rows (z2, reference ops, eager) and the ceiling again;
#   1b         --model 1b --steps 60 --rows z3,z1,z0,ceiling;
#   vocab      --model 124m --vocab 50304 --rows default,ceiling;
#   zero3      --model 124m --rows z3,z1 --steps 16 --profile: each row's torch.profiler op table (by
#              device time) over two warm-up steps, where ZeRO-3's step loses to ZeRO-1's;
#   quick      what fits one 10-minute call, each part under a time limit (`timeout`): tests, one line per test
#              (150 s), kernels (80 s), 124m --rows z3,z1 --steps 20 (170 s), 1b --rows z3,z1 --steps 30
#              (150 s). A part cut off keeps the tests and rows it printed ("[bench] row ...: {...}") in its
#              log. The first run on an H100 (2026-11-26) took 120 s for 113 of the 160 tests.
# Every row starts the launcher and compiles (~0.5-1 min before its steps), so all ten rows of the bench
# take ~15 minutes, more than one device call's 10-minute limit: run one part per call (the default `all`
# only where no such limit applies). A part goes on when another fails; the exit status is the number
# of parts that failed (100: the wheels did not install).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu-checks}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "installing .whl/ failed: run bench/gpu/wheels.sh here and carry .whl" >&2; exit 100; }
# The checkout's root on the path, as `python -m` from it gives: this project is not installed there, so the
# benches run as modules (`python3 -m bench.trainer.kernels`) and import trainer/ and bench/ from the checkout.
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L > "$OUT/device.log" 2>&1
python3 -c "import torch, triton, deepspeed; print(torch.__version__, triton.__version__, deepspeed.__version__, torch.cuda.get_device_name())" >> "$OUT/device.log" 2>&1
cat "$OUT/device.log"
failed=0
part() {  # name, command...: runs it, its output in $OUT/name.log and its last lines here
    local name=$1; shift
    echo "==> $name: $*"
    ${LIMIT:+timeout $LIMIT} "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    tail -n 40 "$OUT/$name.log"
    echo "==> $name: exit $rc"
    [ $rc -eq 0 ] || failed=$((failed + 1))
}
want() { [ "${1:-all}" = all ] || [[ ",$1," == *",$2,"* ]]; }  # the selection is a comma-separated list
sel=${1:-all}
TESTS=${TESTS:-tests/trainer/test_kernels.py tests/trainer/test_model.py tests/trainer/test_backend.py \
    tests/trainer/test_bench_kernels.py tests/trainer/test_train_units.py tests/trainer/test_train_zero.py \
    tests/trainer/test_checkpoint_safety.py}
# shellcheck disable=SC2086  # TESTS: several paths or test ids, split on spaces
want "$sel" tests && part tests python3 -m pytest -v --tb=short -p no:cacheprovider -rs $TESTS
want "$sel" kernels && part kernels python3 -m bench.trainer.kernels
want "$sel" 124m && part train-124m python3 -m bench.trainer.throughput --model 124m --data synthetic --steps 40 --warmup 10 \
    --rows default,z3,z1,z0,ceiling
want "$sel" 124m-more && part train-124m-more python3 -m bench.trainer.throughput --model 124m --data synthetic \
    --steps 40 --warmup 10 --rows z2,z1-ref,z1-eager,z1-ref-eager,ceiling-eager,ceiling
want "$sel" zero3 && part train-124m-zero3 python3 -m bench.trainer.throughput --model 124m --data synthetic \
    --steps 16 --warmup 8 --rows z3,z1 --profile
want "$sel" 1b && part train-1b python3 -m bench.trainer.throughput --model 1b --data synthetic --steps 60 \
    --rows z3,z1,z0,ceiling
want "$sel" vocab && part train-124m-v50304 python3 -m bench.trainer.throughput --model 124m --data synthetic \
    --vocab 50304 --steps 40 --warmup 10 --rows default,ceiling
if [ "$sel" = quick ]; then
    # shellcheck disable=SC2086
    LIMIT=150 part tests python3 -m pytest -v --tb=short -p no:cacheprovider -rs $TESTS
    LIMIT=80 part kernels python3 -m bench.trainer.kernels --iters 10
    LIMIT=170 part train-124m python3 -m bench.trainer.throughput --model 124m --data synthetic --steps 20 \
        --warmup 8 --rows z3,z1
    LIMIT=150 part train-1b python3 -m bench.trainer.throughput --model 1b --data synthetic --steps 30 --warmup 10 \
        --rows z3,z1
fi
exit $failed
