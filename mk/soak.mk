# Concurrency soak, crash-safety harness and recall resources (issue 5, items 3-5).
# Bounded: SOAK_SECONDS of soak, SOAK_RECALLS recalls, CRASH_RUNS kills.

SOAK_SECONDS ?= 60
SOAK_WRITERS ?= 3
SOAK_READERS ?= 2
SOAK_RECALLS ?= 100000
SOAK_DIR     ?= build/soak
CRASH_RUNS   ?= 50
CRASH_DIR    ?= build/crash

.PHONY: soak crash

soak: build ## concurrency soak (SOAK_SECONDS=60: 3 writers, 2 readers, one WAL db, then verify), 100k-recall RSS, large-db recall memory
	$(PY) tests/soak/soak.py --seconds $(SOAK_SECONDS) --writers $(SOAK_WRITERS) \
	  --readers $(SOAK_READERS) --workdir $(SOAK_DIR) --json $(SOAK_DIR)-report.json
	$(PY) tests/test_resources.py --recalls $(SOAK_RECALLS) --workdir $(SOAK_DIR) --large

crash: build ## kill -9 a writer CRASH_RUNS=50 times (half imports, half migrations) and check each database
	$(PY) tests/crash/crash.py --kills $(CRASH_RUNS) --workdir $(CRASH_DIR) \
	  --json $(CRASH_DIR)-report.json
