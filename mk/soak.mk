# Concurrency soak, writer latency under recalls, churn soak, crash-safety harness and
# recall resources.
# Bounded: SOAK_SECONDS of soak, LATENCY_ROUNDS x 5 configurations x LATENCY_SECONDS,
# CHURN_OPS operations, SOAK_RECALLS recalls, CRASH_RUNS kills.

SOAK_SECONDS ?= 60
SOAK_WRITERS ?= 3
SOAK_READERS ?= 2
SOAK_RECALLS ?= 100000
SOAK_DIR     ?= build/soak
LATENCY_EPISODES ?= 30000
LATENCY_SECONDS  ?= 20
LATENCY_ROUNDS   ?= 2
LATENCY_DIR      ?= build/latency
CHURN_EPISODES    ?= 20000
CHURN_OPS         ?= 100000
CHURN_CHECKPOINTS ?= 25
CHURN_SEED        ?= 0
CHURN_FLAGS       ?=
CHURN_TEXTS       ?= zipf
CHURN_DIR         ?= build/churn
CHURN_RECIPE_QUERIES ?= 40
CRASH_RUNS   ?= 50
CRASH_DIR    ?= build/crash

.PHONY: soak latency churn crash

soak: build ## concurrency soak (SOAK_SECONDS=60: 3 writers, 2 readers, one WAL db, then verify), writer latency under recalls, 100k-recall RSS, large-db recall memory
	$(PY) tests/soak/soak.py --seconds $(SOAK_SECONDS) --writers $(SOAK_WRITERS) \
	  --readers $(SOAK_READERS) --workdir $(SOAK_DIR) --json $(SOAK_DIR)-report.json
	$(MAKE) --no-print-directory latency
	$(PY) tests/test_resources.py --recalls $(SOAK_RECALLS) --workdir $(SOAK_DIR) --large

latency: build ## writer latency p50/p99 alone and under touching recalls (pools recent, all), 30k x 384-d, LATENCY_ROUNDS x LATENCY_SECONDS per configuration
	$(PY) tests/soak/latency.py --episodes $(LATENCY_EPISODES) --seconds $(LATENCY_SECONDS) \
	  --rounds $(LATENCY_ROUNDS) --workdir $(LATENCY_DIR) --json $(LATENCY_DIR)-report.json

churn: build ## churn soak: first the recipe of one shell transaction after the Store's writes, checked before any write through the product (SciFact + 3,100 episodes; the titles and new texts of the 60 rows the transaction wrote, REPLACEs of five forms first, and CHURN_RECIPE_QUERIES=40 random queries; tests/soak/recipe_shell_txn.py); then CHURN_EPISODES=20000 episodes, CHURN_OPS=100000 operations from Store and the sqlite3 shell (no rrf), CHURN_CHECKPOINTS=25 checks of every BM25 path against bm25() and a fresh index (CHURN_TEXTS=scifact: SciFact abstracts; CHURN_FLAGS=--knn: with the vec0 index)
	$(PY) tests/soak/recipe_shell_txn.py --workdir $(CHURN_DIR)-recipe \
	  --queries $(CHURN_RECIPE_QUERIES) --json $(CHURN_DIR)-recipe-report.json
	$(PY) tests/soak/churn.py --episodes $(CHURN_EPISODES) --ops $(CHURN_OPS) \
	  --checkpoints $(CHURN_CHECKPOINTS) --seed $(CHURN_SEED) --workdir $(CHURN_DIR) \
	  --texts $(CHURN_TEXTS) --json $(CHURN_DIR)-report.json $(CHURN_FLAGS)

crash: build ## kill -9 a writer CRASH_RUNS=50 times (half imports, half migrations) and check each database
	$(PY) tests/crash/crash.py --kills $(CRASH_RUNS) --workdir $(CRASH_DIR) \
	  --json $(CRASH_DIR)-report.json
