"""The package's layers and its one import rule, read from the source (no import runs).

Front-ends (the command line, the hook, the MCP server, the warm server, the Datasette
plugin, the eval command) → the application layer (open a store, user errors, time,
scopes, the management commands' work, the evaluation) → the store and the embedder →
the core (the extension's loader, the SQL resources and statements, migrations, checks,
the SQLite helpers, the small pure modules). The rule:

* nothing imports a module of a higher layer;
* no front-end imports another front-end, except the command line, inside a function,
  for the command that runs that front-end (``sqlite-rrf mcp`` imports the MCP server
  when it runs, never at import);
* no module imports another module's ``_private`` name, nor reaches one through an
  imported name (``Store._x``, ``cli._open``).

docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import ast
import os
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, "pysrc", "sqlite_rrf")
PACKAGE = "sqlite_rrf"

CORE, STORE, APP, FRONT = 0, 1, 2, 3
LAYER_NAMES = {CORE: "core", STORE: "store and embedding", APP: "app", FRONT: "front-end"}

#: package → layer: the tree is the layer table. A package covers its modules; a new
#: package (or a new module beside the package's own files below) must be given a layer here.
LAYERS: Dict[str, int] = {
    "sqlite_rrf.core": CORE,  # the loader, SQL files, statements, migrations, validation, results
    "sqlite_rrf.store": STORE,  # the memory store: the one door to SQL for the front-ends
    "sqlite_rrf.embedding": STORE,  # model specs and the embedder
    "sqlite_rrf.doctor": STORE,  # `sqlite-rrf check`'s findings and repairs
    "sqlite_rrf.app": APP,  # opening a store, options, display, manage, replicate, setup
    "sqlite_rrf.evaluation": APP,  # BEIR and LongMemEval runs and their metrics
    "sqlite_rrf.cli": FRONT,
    "sqlite_rrf.hook": FRONT,
    "sqlite_rrf.mcp": FRONT,
    "sqlite_rrf.serve": FRONT,
    "sqlite_rrf.datasette_plugin": FRONT,
}

#: The package's own files, beside its packages: its ``__init__`` (``load``,
#: ``loadable_path``, ``__version__``), the version, and ``python -m sqlite_rrf``.
OWN_FILES: Dict[str, int] = {
    "sqlite_rrf": CORE,
    "sqlite_rrf._version": CORE,
    "sqlite_rrf.__main__": FRONT,
}

#: The module names docs/python.md gives, kept as thin re-exports of their homes.
PROMISED: Dict[str, str] = {
    "sqlite_rrf.embed": "sqlite_rrf.embedding.embedder",
    "sqlite_rrf.kernels": "sqlite_rrf.core.kernels",
    "sqlite_rrf.migrations": "sqlite_rrf.core.migrations",
    "sqlite_rrf.resources": "sqlite_rrf.core.sql_files",
    "sqlite_rrf.statements": "sqlite_rrf.core.statements",
}

#: Every key's layer: the packages, the package's own files, and each promised name at the
#: layer of the module it re-exports.
LAYER_OF: Dict[str, int] = {
    **LAYERS,
    **OWN_FILES,
    **{name: LAYERS[".".join(home.split(".")[:2])] for name, home in PROMISED.items()},
}

#: Modules that are part of a front-end held elsewhere (``python -m sqlite_rrf`` is the CLI).
#: ``sqlite-rrf serve`` is the MCP server over HTTP (and the hook's socket): its endpoints
#: are the MCP package's servers.
FRONT_END_OF = {"sqlite_rrf.__main__": "sqlite_rrf.cli", "sqlite_rrf.serve": "sqlite_rrf.mcp"}

#: The front-end that may import others, lazily, for the commands that run them.
DISPATCHER = "sqlite_rrf.cli"

#: Violations the rule tolerates for now (importer, imported module, name or None): none is
#: left; a new one goes here only with the reason and the plan to remove it.
ALLOWED: Set[Tuple[str, str, Optional[str]]] = set()


def modules() -> Iterator[Tuple[str, str]]:
    """(dotted name, path) of every module of the package."""
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
        rel = os.path.relpath(dirpath, ROOT)
        parts = [PACKAGE] + ([] if rel == "." else rel.split(os.sep))
        for f in sorted(filenames):
            if f.endswith(".py"):
                name = ".".join(parts if f == "__init__.py" else parts + [f[:-3]])
                yield name, os.path.join(dirpath, f)


MODULES = dict(modules())


def layer_key(module: str) -> Optional[str]:
    """The LAYERS key that covers ``module``."""
    parts = module.split(".")
    for n in range(len(parts), 1, -1):  # "sqlite_rrf" covers itself only
        key = ".".join(parts[:n])
        if key in LAYER_OF:
            return FRONT_END_OF.get(key, key)
    return module if module in LAYER_OF else None


def is_package(module: str) -> bool:
    return MODULES.get(module, "").endswith("__init__.py")


def resolve(importer: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module an ``ImportFrom`` reads from."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not is_package(importer):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class Import:
    """One name (or module) imported by a module of the package."""

    def __init__(
        self, importer: str, target: str, name: Optional[str], line: int, function: Optional[str]
    ) -> None:
        self.importer, self.target, self.name = importer, target, name
        self.line, self.function = line, function

    def where(self) -> str:
        return f"{self.importer}:{self.line}"


def imports(module: str, path: str) -> Tuple[List[Import], List[Tuple[int, str, str]]]:
    """The package's modules and names that ``module`` imports, and its reaches into
    ``_private`` attributes of imported names (line, imported name, attribute)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found: List[Import] = []
    bound: Dict[str, str] = {}  # local name → the module it came from

    def visit(node: ast.AST, function: Optional[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = child.name if function is None else function
            if isinstance(child, ast.ImportFrom):
                base = resolve(module, child)
                if base == PACKAGE or base.startswith(PACKAGE + "."):
                    for alias in child.names:
                        sub = f"{base}.{alias.name}"
                        if sub in MODULES:  # `from . import hook`: the module itself
                            found.append(Import(module, sub, None, child.lineno, inner))
                            bound[alias.asname or alias.name] = sub
                        else:
                            found.append(Import(module, base, alias.name, child.lineno, inner))
                            bound[alias.asname or alias.name] = base
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith(PACKAGE):
                        found.append(Import(module, alias.name, None, child.lineno, inner))
            visit(child, inner)

    visit(tree, None)
    reaches = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and private(node.attr)
            and bound[node.value.id] != module
        ):
            reaches.append((node.lineno, node.value.id, node.attr))
    return found, reaches


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def violations() -> List[Tuple[Tuple[str, str, Optional[str]], str]]:
    """Every breach of the rule: (its ALLOWED key, what it is)."""
    out: List[Tuple[Tuple[str, str, Optional[str]], str]] = []
    for module, path in MODULES.items():
        found, reaches = imports(module, path)
        mine = layer_key(module)
        if mine is None:  # test_every_module_has_a_layer says so
            continue
        for imp in found:
            theirs = layer_key(imp.target)
            if theirs is None:
                out.append(
                    (
                        (module, imp.target, None),
                        f"{imp.where()}: {imp.target} is not a module with a layer",
                    )
                )
                continue
            key = (module, imp.target, None)
            if LAYER_OF[theirs] > LAYER_OF[mine]:
                out.append(
                    (
                        key,
                        f"{imp.where()}: {LAYER_NAMES[LAYER_OF[mine]]} {module} imports "
                        f"{LAYER_NAMES[LAYER_OF[theirs]]} {imp.target}",
                    )
                )
            elif (
                LAYER_OF[mine] == FRONT
                and LAYER_OF[theirs] == FRONT
                and theirs != mine
                and not (mine == DISPATCHER and imp.function is not None)
            ):
                out.append(
                    (
                        key,
                        f"{imp.where()}: front-end {module} imports front-end "
                        f"{imp.target}" + ("" if imp.function is None else f" (in {imp.function})"),
                    )
                )
            if imp.name is not None and private(imp.name) and imp.target != module:
                out.append(
                    (
                        (module, imp.target, imp.name),
                        f"{imp.where()}: {module} imports {imp.target}'s {imp.name}",
                    )
                )
        for line, name, attr in reaches:
            out.append(((module, "", attr), f"{module}:{line}: {module} reaches {name}.{attr}"))
    return sorted(set(out), key=lambda kw: kw[1])


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if layer_key(m) is None]
    assert not missing, f"give these a layer in LAYERS: {missing}"
    top = {m for m in MODULES if m.count(".") == 1 and not is_package(m)} - set(LAYERS)
    assert top == set(OWN_FILES) - {PACKAGE} | set(PROMISED), "a module beside the packages"
    assert {"sqlite_rrf.cli", "sqlite_rrf.app", "sqlite_rrf.store"} <= set(MODULES)


def test_promised_names_only_re_export_their_homes():
    # each is its docstring and one import from the module docs/python.md now names
    for name, home in PROMISED.items():
        with open(MODULES[name], encoding="utf-8") as f:
            body = ast.parse(f.read()).body
        assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        assert len(body) == 2 and isinstance(body[1], ast.ImportFrom), name
        assert resolve(name, body[1]) == home, name
        assert home in MODULES, home


def test_imports_keep_the_layers():
    found = violations()
    breaches = [what for key, what in found if key not in ALLOWED]
    assert not breaches, "imports against the layers:\n" + "\n".join(breaches)


def test_the_allowed_violations_still_exist():
    # an entry of ALLOWED that no longer matches anything is to be removed with it
    found = {key for key, _ in violations()}
    stale = sorted(str(k) for k in ALLOWED - found)
    assert not stale, f"these are gone: remove them from ALLOWED: {stale}"


@pytest.mark.parametrize(
    "source, expected",
    [
        # a core module importing the app
        (
            "from ..app import UserError\n",
            "core sqlite_rrf.core.validate imports app sqlite_rrf.app",
        ),
        # anybody importing a private name
        ("from ..store.connection import _meta\n", "imports sqlite_rrf.store.connection's _meta"),
        ("from ..store import Store\nStore._recall_params()\n", "reaches Store._recall_params"),
    ],
)
def test_the_rule_sees_a_breach(tmp_path, source, expected, monkeypatch):
    path = tmp_path / "validate.py"
    path.write_text(source)
    monkeypatch.setitem(MODULES, "sqlite_rrf.core.validate", str(path))
    assert any(expected in what for _, what in violations())


@pytest.mark.parametrize(
    "module, source, breach",
    [
        # a front-end importing another, at import or inside a function
        ("sqlite_rrf.serve", "from .hook import respond\n", True),
        ("sqlite_rrf.mcp", "def f():\n    from . import hook\n", True),
        # the command line: inside the command that runs the front-end, not at import
        ("sqlite_rrf.cli.parser", "def build_parser():\n    from .. import hook\n", False),
        ("sqlite_rrf.cli.parser", "from .. import hook\n", True),
    ],
)
def test_the_rule_sees_a_front_end_importing_another(tmp_path, monkeypatch, module, source, breach):
    path = tmp_path / "m.py"
    path.write_text(source)
    monkeypatch.setitem(MODULES, module, str(path))
    found = [
        what
        for _, what in violations()
        if what.startswith(f"{module}:") and "imports front-end" in what
    ]
    assert bool(found) is breach, found


#: The most lines a Python module of the package may have, and a C file of csrc/:
#: a newcomer finds one concern per file.
MAX_PY_LINES = 600
MAX_C_LINES = 500


def test_modules_and_c_files_stay_small():
    too_long = []
    for _, path in modules():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_PY_LINES:
            too_long.append(f"{os.path.relpath(path, ROOT)}: {n} lines")
    csrc = os.path.join(ROOT, os.pardir, os.pardir, "csrc")
    for name in sorted(os.listdir(csrc)):
        if name.endswith((".c", ".h")):
            with open(os.path.join(csrc, name), encoding="utf-8") as f:
                n = sum(1 for _ in f)
            if n > MAX_C_LINES:
                too_long.append(f"csrc/{name}: {n} lines")
    assert not too_long, too_long
