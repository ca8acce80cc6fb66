"""Build of sqlite-rrf: two artefacts from the same C kernels in csrc/.

1. ``sqlite_rrf/rrf.so`` (``.dylib``, ``.dll``): the SQLite loadable extension.
   It is built with the setuptools compiler but as a plain shared library: no
   Python module init, no libpython, and only ``sqlite3_rrf_init`` exported, so
   the ``sqlite3`` shell and every other SQLite client can ``.load`` it.
2. ``sqlite_rrf.core._kernels``: a cffi binding to csrc/kernels.c, so Python code can
   run the cosine kernel on numpy arrays (see pysrc/sqlite_rrf/core/_build_kernels.py).
"""

import os
import re
import shutil
import sys

from setuptools import Extension, setup
from setuptools.errors import CompileError
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def read_version() -> str:
    with open(os.path.join(HERE, "pysrc", "sqlite_rrf", "_version.py"), encoding="utf-8") as f:
        return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


VERSION = read_version()
LOADABLE = "sqlite_rrf.rrf"
if sys.platform == "win32":
    LOADABLE_SUFFIX = ".dll"
elif sys.platform == "darwin":
    LOADABLE_SUFFIX = ".dylib"
else:
    LOADABLE_SUFFIX = ".so"

SQLITE_HEADER = "sqlite3ext.h"
SQLITE_HEADER_HINT = (
    "sqlite-rrf compiles against SQLite's sqlite3ext.h (3.25 or newer). Install it with "
    "`apt-get install libsqlite3-dev` (Debian/Ubuntu), `yum install sqlite-devel` "
    "(Fedora/RHEL/manylinux), `apk add sqlite-dev` (Alpine/musllinux), `brew install sqlite` "
    "(macOS; the SDK's copy also works) or `vcpkg install sqlite3:x64-windows` (Windows), or "
    "point SQLITE_RRF_SQLITE_INCLUDE at the directory that holds it."
)


def sqlite_include_dirs() -> list:
    """Where sqlite3ext.h comes from; the first that applies wins.

    1. ``SQLITE_RRF_SQLITE_INCLUDE`` (must hold sqlite3ext.h);
    2. macOS: Homebrew's keg-only ``sqlite`` (``$HOMEBREW_PREFIX``, /opt/homebrew, /usr/local);
       Windows: vcpkg's ``sqlite3`` port (``$VCPKG_INSTALLATION_ROOT`` as on GitHub's runners,
       ``$VCPKG_ROOT``, or next to ``vcpkg`` on PATH; triplet ``$VCPKG_DEFAULT_TRIPLET`` or
       x64-windows) -- what ``[tool.cibuildwheel]``'s before-all installs;
    3. otherwise the compiler's own path (Linux: /usr/include from libsqlite3-dev,
       sqlite-devel or sqlite-dev; macOS: the SDK).
    """
    env = os.environ.get("SQLITE_RRF_SQLITE_INCLUDE")
    if env:
        if not os.path.isfile(os.path.join(env, SQLITE_HEADER)):
            sys.exit(f"SQLITE_RRF_SQLITE_INCLUDE={env} does not contain {SQLITE_HEADER}. "
                     + SQLITE_HEADER_HINT)
        return [env]
    candidates: list = []
    if sys.platform == "darwin":
        prefixes = [os.environ.get("HOMEBREW_PREFIX"), "/opt/homebrew", "/usr/local"]
        candidates = [os.path.join(p, "opt", "sqlite", "include") for p in prefixes if p]
    elif sys.platform == "win32":
        vcpkg = shutil.which("vcpkg")
        roots = [os.environ.get("VCPKG_INSTALLATION_ROOT"), os.environ.get("VCPKG_ROOT"),
                 os.path.dirname(vcpkg) if vcpkg else None]
        triplet = os.environ.get("VCPKG_DEFAULT_TRIPLET", "x64-windows")
        candidates = [os.path.join(r, "installed", triplet, "include") for r in roots if r]
    for c in candidates:
        if os.path.isfile(os.path.join(c, SQLITE_HEADER)):
            return [c]
    return []


SQLITE_INCLUDE = sqlite_include_dirs()


class BuildExt(build_ext):
    """build_ext that builds LOADABLE as a plain shared library."""

    def _is_loadable(self, fullname: str) -> bool:
        return fullname in (LOADABLE, LOADABLE.rsplit(".", 1)[1])

    def get_ext_filename(self, fullname):
        if self._is_loadable(fullname):
            parts = fullname.split(".")
            return os.path.join(*parts[:-1], parts[-1] + LOADABLE_SUFFIX)
        return super().get_ext_filename(fullname)

    def get_export_symbols(self, ext):
        if self._is_loadable(ext.name):
            return ["sqlite3_rrf_init"]
        return super().get_export_symbols(ext)

    def get_libraries(self, ext):
        if self._is_loadable(ext.name):
            return list(ext.libraries)  # never libpython
        return super().get_libraries(ext)

    def build_extension(self, ext):
        if self._is_loadable(ext.name):
            if self.compiler.compiler_type == "msvc":
                ext.extra_compile_args = ["/W4", "/WX", "/O2"]
            else:
                ext.extra_compile_args = [
                    "-O2", "-std=c11", "-fvisibility=hidden",
                    "-Wall", "-Wextra", "-Werror",
                ]
                if sys.platform == "darwin":
                    ext.extra_link_args = ["-Wl,-exported_symbol,_sqlite3_rrf_init"]
                else:
                    ext.extra_link_args = [
                        "-Wl,--version-script=" + os.path.join(HERE, "csrc", "rrf.map")
                    ]
            try:
                super().build_extension(ext)
            except CompileError as e:
                raise CompileError(f"{e}\n(if the error is a missing {SQLITE_HEADER}: "
                                   f"{SQLITE_HEADER_HINT})") from e
            return
        super().build_extension(ext)


class BuildPy(build_py):
    """build_py that ships the top-level sql/ folder inside the package."""

    def run(self):
        super().run()
        src = os.path.join(HERE, "sql")
        dst = os.path.join(self.build_lib, "sqlite_rrf", "sql")
        for dirpath, _dirs, files in os.walk(src):
            rel = os.path.relpath(dirpath, src)
            for name in files:
                if name.endswith(".sql"):
                    self.mkpath(os.path.join(dst, rel))
                    self.copy_file(os.path.join(dirpath, name), os.path.join(dst, rel, name))


loadable = Extension(
    LOADABLE,
    sources=[
        "csrc/rrf.c",
        "csrc/vec.c",
        "csrc/fuse.c",
        "csrc/fts5q.c",
        "csrc/fts5stop.c",
        "csrc/unichar.c",
        "csrc/strset.c",
        "csrc/tokspec.c",
        "csrc/errors.c",
        "csrc/bm25.c",
        "csrc/bm25_score.c",
        "csrc/bm25_or.c",
        "csrc/bm25_top.c",
        "csrc/bm25_top_pass.c",
        "csrc/bm25_idf.c",
        "csrc/kernels.c",
        "csrc/quant.c",
        "csrc/topk.c",
        "csrc/fold.c",
    ],
    include_dirs=["csrc", *SQLITE_INCLUDE],
    define_macros=[("SQLITE_RRF_VERSION", '"%s"' % VERSION)],
    libraries=[] if sys.platform == "win32" else ["m"],
    depends=["csrc/kernels.h", "csrc/rrf_internal.h", "csrc/bm25_internal.h", "csrc/rrf.map"],
)

setup(
    version=VERSION,
    ext_modules=[loadable],
    cffi_modules=["pysrc/sqlite_rrf/core/_build_kernels.py:ffibuilder"],
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
)
