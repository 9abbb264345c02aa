# kafka-sim: make run · make test · make bench · make lint
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA ?= ./data

.PHONY: run test bench lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# One stamp per extra, refreshed when pyproject.toml changes.
$(VENV)/.installed-run: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test,pipeline]'
	touch $@ $(VENV)/.installed-run

# The multi-process tests and `make cluster` run a real ZooKeeper: Debian's package (Java).
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
$(ZOOKEEPER_JAR):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing ZooKeeper (Debian's zookeeper package)"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper >/dev/null; \
	else \
	  echo "ZooKeeper is missing: run 'sudo apt-get install zookeeper' (Debian/Ubuntu), then again."; exit 1; \
	fi

run: $(VENV)/.installed-run
	$(VENV)/bin/kafka-sim run --log-dirs $(DATA)

test: $(VENV)/.installed-test $(ZOOKEEPER_JAR)
	$(VENV)/bin/pytest -q

bench: $(VENV)/.installed-test
	$(PY) tests/bench/bench_timer.py --quick
	$(PY) tests/bench/bench_protocol.py
	$(PY) tests/bench/bench_storage.py
	$(PY) tests/bench/bench_broker.py
	$(PY) tests/bench/bench_groups.py
	$(PY) tests/bench/bench_idempotence.py
	$(PY) tests/bench/bench_pipeline.py --quick

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(DATA) .pytest_cache .ruff_cache
