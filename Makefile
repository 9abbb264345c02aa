# kafka-sim: make run · make test · make pipeline · make bench · make fuzz · make chaos · make lint · make cluster · make compose-up
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA ?= ./data

.PHONY: run test pipeline bench fuzz chaos lint clean cluster compose-up compose-down

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# One stamp per extra, refreshed when pyproject.toml changes.
# The broker and the clients the README's examples use (kafka-python, confluent-kafka, aiokafka).
$(VENV)/.installed-run: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[clients]'
	touch $@

# The Spark pipeline's extra (PySpark, pyarrow, pandas, matplotlib) on top of the base install.
$(VENV)/.installed-pipeline: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[clients,pipeline]'
	touch $@ $(VENV)/.installed-run

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test,pipeline]'
	touch $@ $(VENV)/.installed-run $(VENV)/.installed-pipeline

# The multi-process tests and `make cluster` run a real ZooKeeper: Debian's package (Java).
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
$(ZOOKEEPER_JAR):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing ZooKeeper (Debian's zookeeper package)"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper >/dev/null; \
	else \
	  echo "ZooKeeper is missing: run 'sudo apt-get install zookeeper' (Debian/Ubuntu), then again."; exit 1; \
	fi

# The compose file is validated in the tests with Debian's docker-compose (no Docker engine needed).
COMPOSE_CHECKER := /usr/bin/docker-compose
$(COMPOSE_CHECKER):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing docker-compose (Debian's package, to validate docker/docker-compose.yml)"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-compose >/dev/null; \
	else \
	  echo "docker-compose is missing: run 'sudo apt-get install docker-compose', then again."; exit 1; \
	fi

# Debian's chromium, for the tests that open the pipeline's HTML report and the web console.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium (Debian's package, for the browser tests)"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; \
	else \
	  echo "chromium is missing: run 'sudo apt-get install chromium', then again."; exit 1; \
	fi

# Bytecode compiled ahead (quick when it is current): with PYTHONDONTWRITEBYTECODE set, Python
# never writes it and every start would compile the broker's sources again.
PRECOMPILE = @$(PY) -m compileall -q broker protocol storage timer >/dev/null
run: $(VENV)/.installed-run
	$(PRECOMPILE)
	$(VENV)/bin/kafka-sim run --log-dirs $(DATA)

# Workers: most tests wait on sockets, clients and subprocesses, so more workers than cores pay;
# the Spark and chaos tests share one worker (their session fixtures are a JVM each).
TEST_WORKERS ?= 3
test: $(VENV)/.installed-test $(ZOOKEEPER_JAR) $(COMPOSE_CHECKER) $(CHROMIUM)
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadgroup

# ZooKeeper and three broker processes in the foreground (Ctrl-C stops them all): clients use
# localhost:9092,localhost:9093,localhost:9094, each broker's control API is on 9644-9646.
ZK_PORT ?= 2181
cluster: $(VENV)/.installed-run $(ZOOKEEPER_JAR)
	$(PRECOMPILE)
	@trap 'kill $$(jobs -p) 2>/dev/null; wait; exit 0' INT TERM; \
	$(VENV)/bin/kafka-sim zookeeper --port $(ZK_PORT) --data-dir $(DATA)/zk-cluster/zookeeper & \
	for i in 0 1 2; do \
	  $(VENV)/bin/kafka-sim run -o zookeeper.connect=127.0.0.1:$(ZK_PORT)/kafka-sim -o broker.id=$$i \
	    --listeners PLAINTEXT://127.0.0.1:$$((9092 + i)) --log-dirs $(DATA)/zk-cluster/broker-$$i \
	    -o control.listener=127.0.0.1:$$((9644 + i)) -o default.replication.factor=3 & \
	done; \
	wait

COMPOSE ?= docker compose
# The control APIs listen beyond the containers' loopback, so they need a token: one per clone.
compose-up:
	@test -s .control-token || (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > .control-token)
	KAFKA_SIM_CONTROL_TOKEN=$$(cat .control-token) $(COMPOSE) -f docker/docker-compose.yml up -d --build
	@echo "for kafka-sim ctl: export KAFKA_SIM_CONTROL_TOKEN=\$$(cat .control-token)"

compose-down:
	KAFKA_SIM_CONTROL_TOKEN=$$(cat .control-token 2>/dev/null || echo none) $(COMPOSE) -f docker/docker-compose.yml down

pipeline: $(VENV)/.installed-pipeline
	@echo "pipeline extra installed: $(VENV)/bin/kafka-sim pipeline audit|stats --data-dir $(DATA)"

bench: $(VENV)/.installed-test
	$(PY) tests/bench/bench_startup.py
	$(PY) tests/bench/bench_timer.py --quick
	$(PY) tests/bench/bench_protocol.py
	$(PY) tests/bench/bench_storage.py
	$(PY) tests/bench/bench_metadata.py
	$(PY) tests/bench/bench_loop_stall.py
	$(PY) tests/bench/bench_loop_hostage.py
	$(PY) tests/bench/bench_broker.py
	$(PY) tests/bench/bench_request_cost.py
	$(PY) tests/bench/bench_fetch_sessions.py --quick
	$(PY) tests/bench/bench_groups.py
	$(PY) tests/bench/bench_idempotence.py
	$(PY) tests/bench/bench_transactions.py --quick
	$(PY) tests/bench/bench_pipeline.py --quick

# The long protocol fuzzing run: FUZZ_INPUTS inputs (default 1,000,000), FUZZ_SEED to vary them.
fuzz: $(VENV)/.installed-test
	$(PY) tests/fuzz/fuzz_long.py

# Seeded kill -9 / SIGSTOP / dropped responses on a 3-process cluster for CHAOS_SECONDS (600 by
# default; CHAOS_SEED replays a run), then the read-back, replica and Spark verdict.
chaos: $(VENV)/.installed-test $(ZOOKEEPER_JAR)
	$(PY) -m tests.chaos.chaos_long

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(DATA) .pytest_cache .ruff_cache
