# Linting the C (issue 25): clang-format, configured by .clang-format at the top of the
# repository, checks every file of csrc/. The version is pinned by pyproject.toml's `lint`
# extra (formatting differs between clang-format releases), and installed into $(VENV)
# from PyPI's clang-format wheel when missing.
#
#   make lint-c     check: fails, listing each change, when a file is not formatted
#   make format-c   format csrc/ in place

CLANG_FORMAT     := $(VENV)/bin/clang-format
CLANG_FORMAT_PIN := $(shell sed -n 's/.*"\(clang-format==[0-9.]*\)".*/\1/p' pyproject.toml)
C_FORMAT_FILES   := $(sort $(wildcard csrc/*.c) $(wildcard csrc/*.h))

.PHONY: lint-c format-c

$(CLANG_FORMAT): pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q "$(CLANG_FORMAT_PIN)"
	@touch $@

lint-c: $(CLANG_FORMAT) ## check that csrc/ is formatted as .clang-format says (clang-format --dry-run -Werror)
	$(CLANG_FORMAT) --dry-run -Werror $(C_FORMAT_FILES)

format-c: $(CLANG_FORMAT) ## format csrc/ in place with clang-format (.clang-format)
	$(CLANG_FORMAT) -i $(C_FORMAT_FILES)
