# wormhole: every target runs from the repository root and uses .venv (created by `make install`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# Test workers (pytest-xdist). Most tests wait on MariaDB, subprocesses or a JVM, so three keep two cores busy.
PYTEST_WORKERS ?= 3
XDIST := -n $(PYTEST_WORKERS) --dist loadgroup

.PHONY: help install browser demo test test-unit test-integration lint bench bench-tpch bench-deps docker clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 20

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev,spark,console,bench]'
	scripts/install-connector-j.sh
	scripts/install-pg-jdbc.sh
	scripts/install-chromium.sh
	touch $(STAMP)

browser:  ## Chromium and chromedriver for the console's browser tests (Debian packages; quick when present)
	scripts/install-chromium.sh

install: $(STAMP)  ## create .venv with wormhole, its test/dev/spark/console/bench extras, Connector/J and pgjdbc for Spark, Chromium for the console's browser tests

demo: $(STAMP)  ## run a real fan-out task on the embedded defaults and show its result
	$(BIN)/python scripts/demo.py

test: $(STAMP) browser  ## run every test (MariaDB and Docker tests skip unless WORMHOLE_REQUIRE_MYSQL=1 / WORMHOLE_REQUIRE_DOCKER=1)
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

test-unit: $(STAMP)  ## fast tests only
	$(BIN)/python -m pytest $(XDIST) tests/unit $(PYTEST_ARGS)

test-integration: $(STAMP)  ## tests against the local MariaDB
	$(BIN)/python -m pytest $(XDIST) -m mysql $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff, then mypy (strict on the core modules; setup.cfg [mypy] sections)
	$(BIN)/ruff check wormhole tests benchmarks scripts
	$(BIN)/mypy wormhole

bench: $(STAMP)  ## throughput: stream, MySQL, the snapshot demo (BENCH_ARGS="--only mysql"); Spark: --only spark
	@# wormhole as installed: pip compiles a package's bytecode, an editable checkout does not (and under
	@# PYTHONDONTWRITEBYTECODE would compile every module again on every run the benchmark times).
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m compileall -q wormhole > /dev/null
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

bench-tpch: $(STAMP) bench-deps  ## whole databases: TPC-H SF 1 against pgloader, mysqldump, mydumper (BENCH_ARGS="--tpch-sf 0.1")
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m compileall -q wormhole > /dev/null
	$(BIN)/python -m benchmarks.run --only tpch $(BENCH_ARGS)

bench-deps: $(STAMP)  ## the benchmarks' baselines: Debian's pgloader and mydumper, tpchgen-cli (the bench extra), data-diff (a venv of its own)
	scripts/install-pgloader.sh
	scripts/install-mydumper.sh
	scripts/install-data-diff.sh

docker:  ## build the image `wormhole` (installs and starts Docker and builds its debian base when missing)
	scripts/docker-setup.sh
	scripts/docker-base.sh
	scripts/docker-build.sh

clean:  ## remove .venv and local state
	rm -rf $(VENV) var build *.egg-info .pytest_cache .ruff_cache .mypy_cache
