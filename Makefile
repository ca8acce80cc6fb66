# sqlite-rrf — `make help` lists the targets.
#
# Everything runs in a virtual environment at .venv (made on first use) with the
# package installed in editable mode, so the C extension builds in place at
# pysrc/sqlite_rrf/rrf.so.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
CC     ?= gcc
EXTRAS ?= test,embed,datasette,mcp
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' pysrc/sqlite_rrf/_version.py)
CSRC   := $(wildcard csrc/*.c) $(wildcard csrc/*.h)
CFLAGS_STRICT := -std=c11 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -DSQLITE_RRF_VERSION='"$(VERSION)"'
DEMO_DB ?= demo/sqlite-rrf-demo.db
# This repository's machines reach no model hub: the model comes from ../shared when it is
# there (a user's machine downloads the default model once instead; see docs/quickstart.md).
SHARED_MODEL := $(abspath ../shared/models/all-MiniLM-L6-v2-f16.gguf)
ifneq ($(wildcard $(SHARED_MODEL)),)
export SQLITE_RRF_MODEL ?= $(SHARED_MODEL)
endif
BENCH_SIZES ?= 10000,100000,1000000

.DEFAULT_GOAL := help
.PHONY: help system-deps venv build demo test bench drill asan asan-test clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

SYSTEM_PACKAGES ?= sqlite3 libsqlite3-dev chromium

system-deps: ## install the sqlite3 shell, SQLite headers and chromium (Debian/Ubuntu, apt-get) where missing
	@if ! command -v sqlite3 >/dev/null 2>&1 || [ ! -f /usr/include/sqlite3ext.h ] || \
	    [ ! -x /usr/bin/chromium ]; then \
	  echo "installing $(SYSTEM_PACKAGES) with apt-get"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip "setuptools>=77" wheel "cffi>=1.16"

$(STAMP): $(VENV)/bin/python pyproject.toml setup.py
	@echo "installing sqlite-rrf[$(EXTRAS)] into $(VENV) (llama-cpp-python compiles once, ~4 min, then comes from pip's cache)"
	@# every package builds in its own isolated environment (llama-cpp-python needs its own
	@# build backend, scikit-build-core, which only its isolated build brings)
	$(PIP) install -q -e ".[$(EXTRAS)]"
	@touch $@

venv: system-deps $(STAMP) ## make .venv with the package and its test extras

pysrc/sqlite_rrf/rrf.so: $(CSRC) setup.py | $(STAMP)
	$(PY) setup.py -q build_ext --inplace

build: system-deps $(STAMP) pysrc/sqlite_rrf/rrf.so ## build the extension in place (pysrc/sqlite_rrf/rrf.so)

demo: build ## the main job: build, create a memory database, import the sample, run a hybrid recall
	@mkdir -p $(dir $(DEMO_DB))
	$(VENV)/bin/sqlite-rrf demo $(DEMO_DB)

test: build ## run the whole test suite (installs what it needs)
	$(PY) -m pytest -q

bench: ## run the benchmarks in tests/bench (not part of the tests; BENCH_SIZES for the recall ones)
	$(MAKE) build EXTRAS=test,embed,bench,mcp
	$(PY) tests/bench/bench_vec_cosine.py
	$(PY) tests/bench/bench_recall.py --sizes $(BENCH_SIZES)
	$(PY) tests/bench/bench_scale.py --sizes $(BENCH_SIZES)
	$(PY) tests/bench/bench_bm25.py --sizes $(BENCH_SIZES)
	$(PY) tests/bench/bench_filters.py
	$(PY) tests/bench/bench_hook.py
	$(PY) tests/bench/bench_mcp_start.py
	$(PY) tests/bench/bench_mcp_start.py --cold

drill: build ## the restore drill with the real Litestream, 3 rounds of 60 s (tests/drill/drill.py)
	$(PY) tests/drill/drill.py --seconds 60 --rounds 3

asan: build/asan/rrf.so ## build the extension with AddressSanitizer + UBSan at build/asan/rrf.so

build/asan/rrf.so: $(CSRC) csrc/rrf.map
	@mkdir -p build/asan
	$(CC) $(CFLAGS_STRICT) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	  -fno-sanitize-recover=undefined -shared -o $@ $(filter %.c,$(CSRC)) \
	  -Wl,--version-script=csrc/rrf.map -lm

asan-test: build asan ## run the test suite against the ASan/UBSan build of the extension
	SQLITE_RRF_LOADABLE=$(CURDIR)/build/asan/rrf \
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(PY) -m pytest -q -p no:cacheprovider -m "not embed" \
	  -k "not test_path_prints_the_loadable_path and not test_console_sessions_replay"

# Further targets (fuzz, soak, crash, wheel, …) live in mk/*.mk, one file per concern.
include $(sort $(wildcard mk/*.mk))

clean: ## remove build outputs (keeps .venv)
	rm -rf build dist *.egg-info pysrc/*.egg-info pysrc/sqlite_rrf/rrf.so pysrc/sqlite_rrf/rrf.dylib \
	  pysrc/sqlite_rrf/core/_kernels*.so pysrc/sqlite_rrf/core/_kernels.c demo wheels/*.whl wheels/*.tar.gz
