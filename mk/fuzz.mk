# Fuzzing the C extension with libFuzzer (tests/fuzz/, README there).
#
# Each tests/fuzz/fuzz_*.c is one target. It is compiled together with csrc/*.c
# (with -DSQLITE_CORE, so the extension calls SQLite directly; a csrc file the
# target #includes itself, to reach its static functions, is left out of the
# list) and linked against
# the system's static libsqlite3, under clang's -fsanitize=fuzzer,address,undefined.
# Outputs go to build/fuzz/: the binaries, the working corpus (corpus/<target>/,
# seeded from tests/fuzz/corpus/<target>/), the logs and crashes/.
#
#   make fuzz                                   every target for FUZZ_SECONDS (60) each
#   make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS=fuzz_vec
#   build/fuzz/fuzz_vec build/fuzz/crashes/<file>   replay one input

FUZZ_CC       ?= clang
FUZZ_SECONDS  ?= 60
FUZZ_DIR      := build/fuzz
FUZZ_SRCS     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_ALL      := $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRCS))
FUZZ_TARGETS  ?= $(FUZZ_ALL)
FUZZ_BINS     := $(addprefix $(FUZZ_DIR)/,$(FUZZ_ALL))
FUZZ_SQLITE   ?= -l:libsqlite3.a -lm -ldl -lpthread
FUZZ_CFLAGS   := -std=c11 -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Wall -Wextra -Werror -DSQLITE_CORE -DSQLITE_RRF_VERSION='"$(VERSION)"' -Icsrc -Itests/fuzz

.PHONY: fuzz fuzz-build fuzz-deps

fuzz-deps: ## install clang (libFuzzer, ASan, UBSan) and SQLite's static library with apt-get where missing
	@need=; have_a=; command -v $(FUZZ_CC) >/dev/null 2>&1 || need=1; \
	for f in /usr/lib/*/libsqlite3.a /usr/lib/libsqlite3.a; do [ -f "$$f" ] && have_a=1; done; \
	{ [ -n "$$have_a" ] && [ -f /usr/include/sqlite3ext.h ]; } || need=1; \
	if [ -n "$$need" ]; then \
	  echo "installing clang and libsqlite3-dev with apt-get"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq clang libsqlite3-dev >/dev/null; \
	fi

fuzz-build: fuzz-deps $(FUZZ_BINS) ## build the libFuzzer targets (clang, ASan + UBSan) into build/fuzz/

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(CSRC) | fuzz-deps
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< \
	  $(filter-out $(shell sed -n 's,^#include "\([a-z0-9_]*\.c\)".*,csrc/\1,p' $<),$(filter %.c,$(CSRC))) \
	  $(FUZZ_SQLITE)

fuzz: fuzz-build ## run each fuzz target for FUZZ_SECONDS (default 60); fails on any crash
	@tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
