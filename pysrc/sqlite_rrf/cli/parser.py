"""The ``sqlite-rrf`` argument parser, built on every run from light modules only: each
command's options and the function that runs it."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Any, List, NoReturn, Optional, Sequence, Tuple

from .. import __version__
from ..app import float_arg, int_arg
from ..core.gate import TOPIC_GATE_COSINE
from ..core.profiles import TABLE as PROFILE_TABLE
from . import commands, manage
from .demo import DEMO_DB, DEMO_QUERY, cmd_demo
from .recall import cmd_recall

DB_HELP = "the memory database (an SQLite file)"
DB_HELP_CREATED = "the memory database (an SQLite file; created if it does not exist)"
#: What each fusion profile does, in a line: ``--profile``'s help (the wheel ships no docs).
#: Written from the one table of the profiles, :data:`sqlite_rrf.core.profiles.TABLE`.
PROFILE_SUMMARIES = {p.name: p.summary for p in PROFILE_TABLE}


def _close(word: str, known: Sequence[str]) -> List[str]:
    """The names of ``known`` that ``word`` is most likely a typo of: the closest, and
    any other as close (within 0.1 of its similarity ratio)."""
    import difflib

    scored = []
    for name in known:
        ratio = difflib.SequenceMatcher(None, word, name).ratio()
        if ratio >= 0.6:
            scored.append((ratio, name))
    scored.sort(key=lambda rn: -rn[0])
    return [name for ratio, name in scored[:3] if ratio >= scored[0][0] - 0.1]


def _did_you_mean(names: Sequence[str]) -> str:
    if not names:
        return ""
    return " (did you mean " + " or ".join(repr(n) for n in names) + "?)"


class Parser(argparse.ArgumentParser):
    """argparse's parser, with "did you mean" for a mistyped command, choice or option,
    and an unknown option refused under its own command's usage (argparse would hand it
    up to the top level, whose usage says nothing about the command's options)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            names = [str(c) for c in choices]
            raise argparse.ArgumentError(
                action,
                f"invalid choice: {value!r} (choose from {', '.join(map(repr, names))})"
                + _did_you_mean(_close(str(value), names)),
            )

    def parse_known_args(  # type: ignore[override]
        self, args: Optional[Sequence[str]] = None, namespace: Any = None
    ) -> Tuple[argparse.Namespace, List[str]]:
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.unrecognized(extras)
        return ns, extras

    def unrecognized(self, extras: List[str]) -> NoReturn:
        """Refuse ``extras`` (arguments no option or positional of this command takes),
        with the options they are most likely typos of."""
        options = [o for o in self._option_string_actions if o.startswith("--")]
        guesses: List[str] = []
        for word in extras:
            if word.startswith("-") and len(word) > 1:
                guesses += [g for g in _close(word.split("=", 1)[0], options) if g not in guesses]
        self.error(f"unrecognized arguments: {' '.join(extras)}" + _did_you_mean(guesses))


def add_model_options(p: argparse.ArgumentParser) -> None:
    from ..embedding.models import DEFAULT_MODEL, DEFAULT_N_CTX

    p.add_argument(
        "--model",
        metavar="MODEL",
        help="embedding model: a GGUF file or hf:ORG/REPO/FILE.gguf (downloaded once "
        "into the Hugging Face cache). Default: $SQLITE_RRF_MODEL, else "
        f"{DEFAULT_MODEL} (a database's own model is loaded only when named)",
    )
    p.add_argument(
        "--n-ctx",
        type=int_arg,
        default=DEFAULT_N_CTX,
        dest="n_ctx",
        help=f"the model's context in tokens (default {DEFAULT_N_CTX}, right for all-MiniLM-L6-v2)",
    )


def add_recall_options(p: argparse.ArgumentParser) -> None:
    from ..core.relevance import DEFAULT_MIN_RELEVANCE
    from ..core.statements import POOL_MODES, PROFILES, recall_defaults

    # every default is the statement's own (statements.DEFAULTS), read from there
    d = recall_defaults()
    decay_k = recall_defaults("decay")["k"]
    p.add_argument(
        "--limit",
        type=int_arg,
        default=None,
        help=f"how many episodes (default {d['result_limit']})",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--explain", action="store_true", help="show each list's contribution")
    p.add_argument(
        "--no-touch", action="store_true", help="do not mark the returned episodes as accessed"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="recall even if the topic gate (on "
        "with --topic-gate) says the query repeats the previous one",
    )
    p.add_argument(
        "--topic-gate",
        action="store_true",
        dest="topic_gate",
        help="turn the topic gate on (off by default): skip the recall when the "
        f"query's embedding has cosine > {TOPIC_GATE_COSINE} with the --session's previous one",
    )
    p.add_argument(
        "--no-collapse",
        action="store_true",
        dest="no_collapse",
        help="show near-duplicates as hits of their own, in score order (by "
        "default they fill one slot, the newest, and among near-ties about "
        "the same thing the newest ranks first)",
    )
    p.add_argument(
        "--include-superseded",
        action="store_true",
        dest="include_superseded",
        help="also recall facts that a newer one replaced (remember/add --replaces)",
    )
    p.add_argument(
        "--scope",
        help="only the episodes of this scope ('shared' or '' is the "
        "shared memory, '*' every scope); default: the working directory's "
        "project (the name of its git work tree's top directory, else of the "
        "directory) and the shared scope",
    )
    p.add_argument("--kind", help="only the episodes of this kind")
    p.add_argument(
        "--since",
        metavar="TIME",
        help="only episodes created at or after TIME: an ISO date/time (UTC), "
        "'yesterday', '2 days ago', 'last week' (its start), or ms since the epoch",
    )
    p.add_argument(
        "--until",
        metavar="TIME",
        help="only episodes created before TIME (as --since; a day or week named "
        "counts whole: --since yesterday --until yesterday is yesterday)",
    )
    p.add_argument(
        "--session",
        metavar="ID",
        help="the caller's session: with --topic-gate, the gate compares the query "
        "with this session's previous one (without a session, a command line "
        "recall is never gated)",
    )
    p.add_argument(
        "--pool",
        choices=POOL_MODES,
        default=None,
        help=f"vector pool (default {d['pool']}): recent, the most recently "
        "accessed episodes; all, the nearest of all episodes (exact, one scan "
        "of the vectors); quantized, the same found through 1-bit codes and "
        "rescored exactly; knn, sqlite-vec's nearest (needs `sqlite-rrf knn DB`)",
    )
    p.add_argument(
        "--pool-size",
        type=int_arg,
        default=None,
        dest="pool_size",
        help=f"how many episodes the vector pool holds (default {d['pool_size']})",
    )
    p.add_argument(
        "--oversample",
        type=int_arg,
        default=None,
        help="quantized pool: how many times pool-size candidates the codes "
        f"select before the exact rescoring (default {d['oversample']})",
    )
    p.add_argument(
        "--bm25-limit",
        type=int_arg,
        default=None,
        dest="bm25_limit",
        help=f"how many BM25 hits join the candidates (default {d['bm25_limit']})",
    )
    p.add_argument(
        "--k",
        type=float_arg,
        default=None,
        help=f"RRF constant (default {d['k']:g}; {decay_k:g} for the decay profile)",
    )
    p.add_argument(
        "--weights",
        metavar="B,V,R,A",
        help="weights of the bm25, vector, recency and access lists (default "
        f"{d['w_bm25']:g},{d['w_vec']:g},{d['w_recency']:g},{d['w_access']:g})",
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help=f"fusion profile (default {d['profile']}): "
        + "; ".join(f"{name}: {what}" for name, what in PROFILE_SUMMARIES.items()),
    )
    p.add_argument(
        "--alpha",
        type=float_arg,
        default=None,
        help="hybrid and convex profiles: weight of the cosine against BM25 "
        f"(default {d['alpha']:g})",
    )
    p.add_argument(
        "--min-similarity",
        type=float_arg,
        default=None,
        dest="min_similarity",
        help="drop candidates with no BM25 hit and a similarity below this",
    )
    p.add_argument(
        "--min-relevance",
        type=float_arg,
        default=None,
        dest="min_relevance",
        metavar="R",
        help="print no hit unless one's relevance (0 to 1, the same scale for every "
        "query) is at least R (default: no floor; the hook and MCP recall use "
        f"{DEFAULT_MIN_RELEVANCE:g})",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sqlite-rrf``."""
    from ..core.statements import POOL_MODES, PROFILES, recall_defaults

    parser = Parser(
        prog="sqlite-rrf",
        description="Hybrid retrieval in SQLite: an agent memory recalled by one SQL statement.",
    )
    parser.add_argument("--version", action="version", version=f"sqlite-rrf {__version__}")
    sub: Any = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("init", help="create or migrate a memory database")
    p.add_argument("db", help="the memory database to create, or to bring to the current schema")
    p.set_defaults(func=commands.cmd_init)

    p = sub.add_parser("import", help="import episodes from a JSONL file (one per line)")
    p.add_argument("db", help=DB_HELP_CREATED)
    p.add_argument(
        "file",
        help="JSONL (what `export` writes): id, content, optional "
        "embedding (JSON array), created_at, accessed_at (ms since the epoch), "
        "access_count, importance, kind, metadata, scope, superseded_by, confirmed_at "
        "(as export writes them), replaces (the id of an episode this line replaces: "
        "it is kept, marked superseded); - for stdin",
    )
    p.add_argument("--replace", action="store_true", help="replace episodes whose id exists")
    add_model_options(p)
    p.set_defaults(func=commands.cmd_import)

    p = sub.add_parser("add", help="add one episode")
    p.add_argument("db", help=DB_HELP_CREATED)
    p.add_argument("text", help="the episode's text")
    p.add_argument("--id", help="the episode's id (a new one is made when not given)")
    p.add_argument("--importance", choices=("low", "normal", "high"), default="normal")
    p.add_argument("--kind", help="free text stored with the episode (recall --kind filters)")
    p.add_argument(
        "--replaces",
        metavar="ID",
        help="the id of the fact this one replaces: that fact is kept but marked superseded, "
        "and no recall returns it unless asked (--include-superseded)",
    )
    p.add_argument(
        "--scope",
        default="",
        help="the memory it belongs to: a project, a user "
        "(default: 'shared', stored as '', the shared memory every project's "
        "recall includes)",
    )
    add_model_options(p)
    p.set_defaults(func=commands.cmd_add)

    p = sub.add_parser("recall", help="the top episodes for a query")
    p.add_argument("db", help=DB_HELP)
    p.add_argument("query", help="what to recall, in plain words")
    add_recall_options(p)
    add_model_options(p)
    p.set_defaults(func=cmd_recall)

    manage.add_parsers(sub, DB_HELP, add_model_options)  # list, get, update, forget, export, vacuum
    p = sub.add_parser("stats", help="counts and facts about a database, by scope")
    p.add_argument("db", help=DB_HELP)
    p.add_argument(
        "--json",
        action="store_true",
        help="print them as a JSON object (times in ms since the epoch)",
    )
    p.set_defaults(func=manage.cmd_stats)

    p = sub.add_parser(
        "stopwords",
        help="recompute and print the BM25 stopwords (terms in "
        "at least half of the episodes, dropped from queries)",
    )
    p.add_argument("db", help=DB_HELP)
    p.add_argument("--json", action="store_true", help="print them as a JSON object")
    p.set_defaults(func=commands.cmd_stopwords)

    p = sub.add_parser(
        "maintain",
        help="the upkeep a read never does: compute and pack "
        "pending sign codes, refresh stale BM25 stopwords, merge the full-text "
        "index",
    )
    p.add_argument("db", help=DB_HELP)
    p.add_argument("--json", action="store_true", help="print what was done as a JSON object")
    p.set_defaults(func=commands.cmd_maintain)

    p = sub.add_parser("path", help="print the loadable extension's path (for .load)")
    p.set_defaults(func=commands.cmd_path)

    own = recall_defaults()  # the statement's defaults (statements.DEFAULTS)
    p = sub.add_parser(
        "sql",
        help="print the recall statement of one pool and one profile "
        "(neither named: sql/recall.sql, the default's)",
    )
    p.add_argument(
        "--pool",
        choices=POOL_MODES,
        default=None,
        help=f"print the statement of this pool (knn: sqlite-vec's KNN; default {own['pool']})",
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help=f"print the statement of this profile (default {own['profile']})",
    )
    p.set_defaults(func=commands.cmd_sql)

    p = sub.add_parser("knn", help="add the sqlite-vec index for --pool knn")
    p.add_argument("db", help=DB_HELP)
    p.set_defaults(func=commands.cmd_knn)

    p = sub.add_parser(
        "check",
        help="check the database whole (integrity, full-text index, "
        "vectors, codes, blocks); --repair fixes what it finds",
    )
    p.add_argument("db", help=DB_HELP)
    p.add_argument(
        "--repair", action="store_true", help="repair what the check finds, in one transaction"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=commands.cmd_check)

    p = sub.add_parser(
        "embed", help="embed the episodes that have no embedding (batched, resumable)"
    )
    p.add_argument("db", help=DB_HELP)
    p.add_argument(
        "--batch-size",
        type=int_arg,
        default=64,
        dest="batch_size",
        help="episodes per batch; each batch is written all or nothing (default 64)",
    )
    add_model_options(p)
    p.set_defaults(func=commands.cmd_embed)

    p = sub.add_parser(
        "model",
        help="download a model into the Hugging Face cache (if it is "
        "not there) and print its local path",
    )
    p.add_argument(
        "spec",
        nargs="?",
        metavar="MODEL",
        help="a GGUF file or hf:ORG/REPO/FILE.gguf (default: $SQLITE_RRF_MODEL, else "
        "the default model)",
    )
    p.set_defaults(func=commands.cmd_model)

    p = sub.add_parser(
        "demo",
        help="make a demo database from the packaged sample episodes "
        "and show one hybrid recall of it, each list's part explained",
    )
    p.add_argument(
        "db",
        nargs="?",
        default=DEMO_DB,
        help=f"where the demo database goes (default {DEMO_DB}); an existing file "
        "is replaced only if the demo made it",
    )
    p.add_argument("--query", default=DEMO_QUERY, help="the query of the demo's recall")
    p.add_argument(
        "--limit", type=int_arg, default=None, help="how many episodes it shows (default: recall's)"
    )
    p.add_argument(
        "--pool-size",
        type=int_arg,
        default=10,
        dest="pool_size",
        help="the recent pool (small, so the sample shows BM25 rescuing an old "
        "episode; default 10)",
    )
    add_model_options(p)
    p.set_defaults(func=cmd_demo)

    # The agents' ways in: their modules import their own dependencies (the mcp SDK) only
    # when the command runs.
    from .. import hook, mcp, serve as server

    p = sub.add_parser(
        "serve",
        help="one warm process for the hook (a Unix socket) and MCP "
        "over streamable HTTP (--http): the model and the connection stay "
        "loaded",
    )
    server.add_arguments(p)
    add_model_options(p)
    p.set_defaults(func=server.run)

    p = sub.add_parser(
        "mcp",
        help="serve the memory to agents over the Model Context Protocol "
        "(stdio; needs the mcp extra)",
    )
    mcp.add_arguments(p)
    add_model_options(p)
    p.set_defaults(func=mcp.run)

    p = sub.add_parser(
        "hook",
        help="an agent's prompt hook: read the hook's JSON on stdin, "
        "print the recollection as Markdown",
    )
    hook.add_arguments(p)
    add_model_options(p)
    p.set_defaults(func=hook.run)

    from . import evaluate as evaluation_cli

    evaluation_cli.add_parser(sub)
    from . import replicate  # replicate, restore (Litestream: the replicate extra)

    replicate.add_parsers(sub, DB_HELP)
    from . import setup  # setup: wire the memory into an agent's host

    setup.add_parsers(sub, DB_HELP)
    return parser
