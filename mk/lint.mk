# Linting. ruff (lint rules and format) and mypy check the Python package, as
# pyproject.toml's [tool.ruff] and [tool.mypy] say; clang-format, configured by
# .clang-format at the top of the repository, checks every file of csrc/. The versions are
# pinned by pyproject.toml's `lint` extra (verdicts differ between releases) and installed
# into $(VENV) from PyPI when missing. .ci/run runs `make lint` before `make test`.
#
# ruff needs nothing but itself, so it runs first; mypy reads the types of the package's
# dependencies (apsw, numpy, mcp, ...), so it needs the package installed with its extras
# (the `venv` target, as `make test` installs it): from a cold clone `make lint` makes
# .venv itself, and `make test` after it finds it made.
#
#   make lint       all of the below
#   make lint-py    ruff check, ruff format --check (lint-ruff), mypy (lint-types)
#   make lint-c     check: fails, listing each change, when a file is not formatted
#   make lint-docs  the generated parts are current: docs/cli.md's (cog, from the parser),
#                   docs/profiles.md's table and sql/recall/header.sql's list of the
#                   profiles (from sqlite_rrf.core.profiles.TABLE)
#   make format     ruff format and clang-format in place (format-py, format-c)
#   make cli-docs   regenerate docs/cli.md's generated parts from the parser
#   make profile-docs  regenerate what is written from the table of the profiles

CLANG_FORMAT     := $(VENV)/bin/clang-format
CLANG_FORMAT_PIN := $(shell sed -n 's/.*"\(clang-format==[0-9.]*\)".*/\1/p' pyproject.toml)
C_FORMAT_FILES   := $(sort $(wildcard csrc/*.c) $(wildcard csrc/*.h))

RUFF             := $(VENV)/bin/ruff
MYPY             := $(VENV)/bin/mypy
LINT_PINS        := $(shell sed -n 's/^lint = \[\(.*\)\]/\1/p' pyproject.toml | tr -d '",')
PY_LINT_PATHS    := pysrc tests tools
COG              := $(VENV)/bin/cog
# docs/cli.md's cog blocks call tools/cli_docs.py, which reads sqlite_rrf.cli.build_parser()
CLI_DOCS         := docs/cli.md
# docs/profiles.md's cog block calls tools/profile_docs.py, which reads sqlite_rrf.core.profiles
PROFILE_DOCS     := docs/profiles.md

.PHONY: lint lint-py lint-ruff lint-types lint-c lint-docs format format-py format-c cli-docs \
	profile-docs

lint: lint-py lint-c lint-docs ## ruff, mypy, clang-format and the generated CLI reference: the checks .ci/run makes

LINT_STAMP       := $(VENV)/.lint-installed

$(LINT_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q $(LINT_PINS)
	@touch $@

lint-py: lint-ruff lint-types ## ruff check, ruff format --check and mypy on the package (pyproject.toml)

lint-ruff: $(LINT_STAMP) ## ruff's lint rules and format check on pysrc/, tests/ and tools/
	$(RUFF) check $(PY_LINT_PATHS)
	$(RUFF) format --check $(PY_LINT_PATHS)

lint-types: $(LINT_STAMP) venv ## mypy on the package, its dependencies installed (the venv target)
	$(MYPY)

format: format-py format-c ## format the Python (ruff format) and csrc/ (clang-format) in place

format-py: $(LINT_STAMP) ## ruff format the Python in place
	$(RUFF) format $(PY_LINT_PATHS)

$(CLANG_FORMAT): pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q "$(CLANG_FORMAT_PIN)"
	@touch $@

lint-c: $(CLANG_FORMAT) ## check that csrc/ is formatted as .clang-format says (clang-format --dry-run -Werror)
	$(CLANG_FORMAT) --dry-run -Werror $(C_FORMAT_FILES)

format-c: $(CLANG_FORMAT) ## format csrc/ in place with clang-format (.clang-format)
	$(CLANG_FORMAT) -i $(C_FORMAT_FILES)

# The command line's reference: docs/cli.md's tables of commands and options are generated
# from the argparse parser by cog (the `lint` extra pins cogapp), so they cannot drift.
lint-docs: $(LINT_STAMP) venv ## check that the generated docs are current: docs/cli.md's tables (make cli-docs), the profiles' table and list (make profile-docs)
	@$(COG) --check -I tools $(CLI_DOCS) || { \
	  echo "$(CLI_DOCS) is stale: the parser's options changed; run make cli-docs and commit it" >&2; exit 1; }
	@$(COG) --check -I tools $(PROFILE_DOCS) && $(PY) -m sqlite_rrf.core.statements --check || { \
	  echo "the profiles' generated text is stale: sqlite_rrf.core.profiles changed; run make profile-docs and commit it" >&2; exit 1; }

cli-docs: $(LINT_STAMP) venv ## regenerate docs/cli.md's tables of commands and options from the parser (cog)
	$(COG) -r -I tools $(CLI_DOCS)

# The fusion profiles are described once, in sqlite_rrf.core.profiles.TABLE: cog writes
# docs/profiles.md's table from it, and the statements module the list of the profiles in
# sql/recall/header.sql (and, through the header, sql/recall.sql).
profile-docs: $(LINT_STAMP) venv ## regenerate docs/profiles.md's table and sql/recall/header.sql's list of the profiles
	$(COG) -r -I tools $(PROFILE_DOCS)
	$(PY) -m sqlite_rrf.core.statements --write
