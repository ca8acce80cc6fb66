"""``sqlite-rrf setup`` (pysrc/sqlite_rrf/app/hosts.py, setup_files.py, setup_check.py; the
command line in cli/setup.py): the memory wired into an agent's host, in a temporary HOME
and project, the written hook run as Claude Code runs it, the written ``.mcp.json``
started by the MCP SDK's stdio client, and ``setup --check``."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from tests.conftest import embedding_model, needs_model

SCRIPT = os.path.join(os.path.dirname(sys.executable), "sqlite-rrf")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "shop"
    (p / ".git").mkdir(parents=True)  # a project: a git work tree
    return p


def env_for(home: Path) -> Dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("XDG_") and k not in ("SQLITE_RRF_TOKEN",)
    }
    env["HOME"] = str(home)
    env["XDG_RUNTIME_DIR"] = str(home / "run")
    (home / "run").mkdir(exist_ok=True, mode=0o700)
    env["PATH"] = os.path.dirname(sys.executable) + ":/usr/bin:/bin"
    return env


def setup(
    home: Path, *args: str, cwd: Optional[Path] = None, ok: bool = True
) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "setup", *args],
        env=env_for(home),
        cwd=str(cwd or home),
        capture_output=True,
        text=True,
    )
    if ok:
        assert p.returncode == 0, p.stderr + p.stdout
    return p


def model() -> str:
    m = embedding_model()
    assert m is not None
    return m


def snapshot(root: Path) -> Dict[str, bytes]:
    """Every file under ``root`` (the state directory left out) and its bytes."""
    out = {}
    for dirpath, _, files in os.walk(root):
        if ".local/state" in dirpath:
            continue
        for f in files:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = fh.read()
    return out


def dirs(root: Path) -> List[str]:
    return sorted(
        os.path.relpath(d, root)
        for d, _, _ in os.walk(root)
        if ".local" not in d and "run" not in d
    )


def hook_of(settings: Path) -> Dict[str, Any]:
    data = json.loads(settings.read_text())
    ours = [
        h
        for g in data["hooks"]["UserPromptSubmit"]
        for h in g["hooks"]
        if "sqlite-rrf" in h.get("command", "") or h.get("type") == "http"
    ]
    assert len(ours) == 1, data
    return ours[0]


USER_SETTINGS = {
    "permissions": {"allow": ["Bash(make test)"]},
    "hooks": {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "echo hello", "timeout": 3}]}
        ],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}],
    },
}
USER_MCP = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "gh-mcp"]}}}


@needs_model
def test_merge_keeps_what_the_user_has(home: Path, project: Path) -> None:
    db = home / "mem.db"
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps(USER_SETTINGS))
    (project / ".mcp.json").write_text(json.dumps(USER_MCP))
    setup(home, "claude-code", "--project", str(project), "--db", str(db), "--model", model())
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == USER_SETTINGS["permissions"]
    assert settings["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    groups = settings["hooks"]["UserPromptSubmit"]
    assert groups[0] == USER_SETTINGS["hooks"]["UserPromptSubmit"][0]
    hook = hook_of(project / ".claude" / "settings.json")
    assert hook["type"] == "command" and hook["timeout"] == 10
    argv = shlex.split(hook["command"])
    assert argv[1:3] == ["hook", str(db)]
    assert argv[argv.index("--model") + 1] == model()
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert servers["github"] == USER_MCP["mcpServers"]["github"]
    assert servers["memory"]["args"][:2] == ["mcp", str(db)]
    assert servers["memory"]["args"][servers["memory"]["args"].index("--model") + 1] == model()
    assert db.exists()  # made, so the hook's first prompt finds it


@needs_model
def test_twice_changes_nothing_and_undo_is_byte_identical(home: Path, project: Path) -> None:
    db = home / "mem.db"
    (project / ".claude").mkdir()
    # formatting json.dumps would never write: the undo must put these very bytes back
    (project / ".claude" / "settings.json").write_text(
        '{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"echo hi"}]}]},\n'
        '\t"model": "opus"}'
    )
    (project / ".mcp.json").write_text('{ "mcpServers": {"x": {"command": "x"}} }')
    before = snapshot(project)
    tree = dirs(project)
    args = ["claude-code", "--project", str(project), "--db", str(db), "--model", model()]
    setup(home, *args)
    first = snapshot(project)
    assert first != before
    again = setup(home, *args)
    assert snapshot(project) == first
    assert again.stdout.count("unchanged") == 2, again.stdout
    setup(home, *args, "--undo")
    assert snapshot(project) == before
    assert dirs(project) == tree


@needs_model
def test_undo_of_files_setup_made_removes_them(home: Path, project: Path) -> None:
    before, tree = snapshot(project), dirs(project)
    args = [
        "claude-code",
        "--project",
        str(project),
        "--db",
        str(home / "m.db"),
        "--model",
        model(),
    ]
    setup(home, *args)
    assert (project / ".claude" / "settings.json").exists() and (project / ".mcp.json").exists()
    setup(home, *args, "--undo")
    assert snapshot(project) == before and dirs(project) == tree


@needs_model
def test_undo_after_the_user_edited_keeps_their_edit(home: Path, project: Path) -> None:
    args = [
        "claude-code",
        "--project",
        str(project),
        "--db",
        str(home / "m.db"),
        "--model",
        model(),
    ]
    (project / ".mcp.json").write_text(json.dumps(USER_MCP))
    setup(home, *args)
    data = json.loads((project / ".mcp.json").read_text())
    data["mcpServers"]["later"] = {"command": "later"}
    (project / ".mcp.json").write_text(json.dumps(data, indent=4))
    setup(home, *args, "--undo")
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert set(servers) == {"github", "later"}
    assert not (project / ".claude").exists()  # untouched since: removed exactly


@needs_model
def test_dry_run_prints_and_writes_nothing(home: Path, project: Path) -> None:
    db = home / "m.db"
    p = setup(
        home,
        "claude-code",
        "--project",
        str(project),
        "--db",
        str(db),
        "--model",
        model(),
        "--dry-run",
    )
    assert "+++ " + str(project / ".claude" / "settings.json") in p.stdout
    assert '"UserPromptSubmit"' in p.stdout and '"mcpServers"' in p.stdout
    assert not (project / ".claude").exists() and not (project / ".mcp.json").exists()
    assert not db.exists()


@needs_model
def test_a_server_of_the_same_name_that_is_not_ours_is_left_alone(
    home: Path, project: Path
) -> None:
    theirs = '{"mcpServers": {"memory": {"command": "other-memory"}}}'
    (project / ".mcp.json").write_text(theirs)
    p = setup(
        home,
        "claude-code",
        "--project",
        str(project),
        "--db",
        str(home / "m.db"),
        "--model",
        model(),
        ok=False,
    )
    assert p.returncode == 1
    assert "already has an MCP server named 'memory'" in p.stderr and "--name" in p.stderr
    assert (project / ".mcp.json").read_text() == theirs
    assert not (project / ".claude").exists()  # nothing half-done


def test_a_broken_settings_file_is_refused(home: Path, project: Path) -> None:
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"hooks": {,}}')
    p = setup(
        home,
        "claude-code",
        "--project",
        str(project),
        "--db",
        str(home / "m.db"),
        "--no-model",
        ok=False,
    )
    assert p.returncode == 1
    assert "settings.json: not valid JSON" in p.stderr and "line 1 column 12" in p.stderr
    assert (project / ".claude" / "settings.json").read_text() == '{"hooks": {,}}'


def test_no_model_to_pin_is_said(home: Path, project: Path) -> None:
    env = env_for(home)
    env.pop("SQLITE_RRF_MODEL", None)
    env["HF_HOME"] = str(home / "hf")
    env["HF_HUB_OFFLINE"] = "1"
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "setup", "claude-code", "--project", str(project)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 1
    assert "no embedding model to pin" in p.stderr and "--model PATH" in p.stderr
    assert not (project / ".claude").exists()


def fill(db: Path, scope: str) -> None:
    from sqlite_rrf.embedding.embedder import Embedder
    from sqlite_rrf.store import Store

    emb = Embedder(model())
    with Store(str(db), embedder=emb) as s:
        s.add(
            "Production Postgres credentials are kept in Vault at secret/shop/postgres.",
            id="creds",
            scope=scope,
        )
        s.add(
            "Shop deploys go out on Tuesdays after the nightly backup.", id="deploys", scope=scope
        )
    emb.close()


def claude_runs(
    command: str, project: Path, home: Path, prompt: str
) -> subprocess.CompletedProcess:
    """The command hook as Claude Code runs it: through the shell, in the project, the
    hook's JSON on stdin."""
    payload = {
        "session_id": "s1",
        "transcript_path": str(home / "t.jsonl"),
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }
    env = env_for(home)
    env.pop("SQLITE_RRF_MODEL", None)  # the pinned model must be enough
    env["CLAUDE_PROJECT_DIR"] = str(project)
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload).encode(),
        cwd=str(project),
        env=env,
        capture_output=True,
        timeout=60,
    )


@needs_model
def test_the_written_hook_runs_as_claude_code_runs_it(home: Path, project: Path) -> None:
    db = home / "m.db"
    fill(db, "shop")
    setup(home, "claude-code", "--project", str(project), "--db", str(db), "--model", model())
    hook = hook_of(project / ".claude" / "settings.json")
    p = claude_runs(hook["command"], project, home, "where are the postgres credentials?")
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    out = json.loads(p.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    assert "secret/shop/postgres" in out["additionalContext"]
    assert "scope `shop` and the shared scope" in out["additionalContext"]


@needs_model
def test_the_written_mcp_json_starts_with_the_sdk_client(home: Path, project: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = home / "m.db"
    fill(db, "shop")
    setup(home, "claude-code", "--project", str(project), "--db", str(db), "--model", model())
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["memory"]

    async def main() -> Tuple[List[str], str]:
        params = StdioServerParameters(
            command=entry["command"],
            args=entry["args"],
            env={"HOME": str(home), "PATH": "/usr/bin:/bin"},  # no SQLITE_RRF_MODEL
            cwd=str(project),
        )
        with open(home / "mcp.err", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = [t.name for t in (await session.list_tools()).tools]
                    res = await session.call_tool("recall", {"query": "postgres credentials"})
                    text = "".join(getattr(c, "text", "") for c in res.content)
        return tools, text

    tools, text = asyncio.run(main())
    assert {"remember", "recall"} <= set(tools)
    assert "secret/shop/postgres" in text
    err = (home / "mcp.err").read_text()
    assert "vector list is off" not in err, err


@needs_model
@pytest.mark.parametrize(
    "host, rel, key",
    [("cursor", ".cursor/mcp.json", "command"), ("gemini", ".gemini/settings.json", "command")],
)
def test_cursor_and_gemini(home: Path, project: Path, host: str, rel: str, key: str) -> None:
    db = home / "m.db"
    path = project / rel
    path.parent.mkdir()
    path.write_text('{"theme": "dark", "mcpServers": {"other": {"command": "o"}}}')
    before = snapshot(project)
    setup(home, host, "--project", str(project), "--db", str(db), "--model", model())
    data = json.loads(path.read_text())
    assert data["theme"] == "dark" and data["mcpServers"]["other"] == {"command": "o"}
    entry = data["mcpServers"]["memory"]
    assert os.path.basename(entry[key]) == "sqlite-rrf" and entry["args"][:2] == ["mcp", str(db)]
    setup(home, host, "--project", str(project), "--db", str(db), "--model", model())
    assert json.loads(path.read_text()) == data
    setup(home, host, "--project", str(project), "--db", str(db), "--undo")
    assert snapshot(project) == before
    # --user writes the user's own file
    setup(home, host, "--user", "--db", str(db), "--model", model())
    assert json.loads((home / rel).read_text())["mcpServers"]["memory"]["args"][1] == str(db)


@needs_model
def test_user_scope_prints_claude_mcp_add_without_claude(home: Path) -> None:
    db = home / "m.db"
    p = setup(home, "claude-code", "--user", "--db", str(db), "--model", model())
    assert "claude is not on PATH" in p.stdout
    line = next(ln for ln in p.stdout.splitlines() if "claude mcp add" in ln)
    cmd = shlex.split(line.split(": ", 1)[1])
    assert cmd[:6] == ["claude", "mcp", "add", "--scope", "user", "memory"]
    assert cmd[6] == "--" and cmd[8:10] == ["mcp", str(db)]
    assert hook_of(home / ".claude" / "settings.json")["timeout"] == 10
    p = setup(home, "claude-code", "--user", "--db", str(db), "--undo")
    assert "claude mcp remove --scope user memory" in p.stdout
    assert not (home / ".claude").exists()


@needs_model
def test_systemd_unit(home: Path) -> None:
    db = home / "m.db"
    setup(home, "systemd", "--db", str(db), "--model", model(), "--url", "http://127.0.0.1:8799")
    unit = (home / ".config" / "systemd" / "user" / "sqlite-rrf.service").read_text()
    exec_line = next(ln for ln in unit.splitlines() if ln.startswith("ExecStart="))
    argv = shlex.split(exec_line[len("ExecStart=") :])
    assert argv[1:5] == ["serve", str(db), "--http", "127.0.0.1:8799"]
    assert argv[argv.index("--model") + 1] == model()
    assert "WantedBy=default.target" in unit
    # --server now finds a server configured to run
    project = home / "proj"
    project.mkdir()
    setup(
        home,
        "claude-code",
        "--server",
        "--url",
        "http://127.0.0.1:8799",
        "--project",
        str(project),
        "--db",
        str(db),
        "--model",
        model(),
    )
    hook = hook_of(project / ".claude" / "settings.json")
    assert hook == {"type": "http", "url": "http://127.0.0.1:8799/hook", "timeout": 5}
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["memory"] == {
        "type": "http",
        "url": "http://127.0.0.1:8799/s/proj/mcp",  # the project's scope
    }
    setup(home, "systemd", "--undo")
    assert not (home / ".config").exists()


def test_server_without_a_server_is_refused(home: Path, project: Path) -> None:
    p = setup(
        home,
        "claude-code",
        "--server",
        "--url",
        "http://127.0.0.1:9",
        "--project",
        str(project),
        "--db",
        str(home / "m.db"),
        "--no-model",
        ok=False,
    )
    assert p.returncode == 1 and "no server is configured" in p.stderr
    assert "sqlite-rrf setup systemd" in p.stderr
    assert not (project / ".claude").exists()


# ---- setup --check ----


def check(home: Path, project: Path) -> subprocess.CompletedProcess:
    env = env_for(home)
    env.pop("SQLITE_RRF_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "setup", "--check", "--project", str(project)],
        env=env,
        cwd=str(project),
        capture_output=True,
        text=True,
        timeout=300,
    )


@needs_model
def test_check_passes_on_a_good_setup(home: Path, project: Path) -> None:
    db = home / "m.db"
    fill(db, "shop")
    setup(home, "claude-code", "--project", str(project), "--db", str(db), "--model", model())
    p = check(home, project)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "schema version" in p.stdout and "matches the database's" in p.stdout
    assert "`shop` and `shared` (2 episodes)" in p.stdout
    assert "5 with a test prompt: p50" in p.stdout and p.stdout.rstrip().endswith("ok")


@needs_model
def test_check_catches_a_missing_model(home: Path, project: Path) -> None:
    db = home / "m.db"
    fill(db, "shop")
    gone = home / "gone.gguf"
    shutil.copy(model(), gone)
    setup(home, "claude-code", "--project", str(project), "--db", str(db), "--model", str(gone))
    gone.unlink()
    p = check(home, project)
    assert p.returncode == 1
    assert f"the model the hook uses ({gone}) cannot be used" in p.stdout
    assert "fix: pin one that can: sqlite-rrf setup claude-code --model PATH" in p.stdout


@needs_model
def test_check_catches_a_missing_database(home: Path, project: Path) -> None:
    db = home / "m.db"
    setup(home, "claude-code", "--project", str(project), "--db", str(db), "--model", model())
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(db) + suffix):
            os.unlink(str(db) + suffix)
    p = check(home, project)
    assert p.returncode == 1
    assert f"{db}: no such database" in p.stdout and "fix: sqlite-rrf init" in p.stdout


@needs_model
def test_check_catches_a_wrong_scope(home: Path, tmp_path: Path) -> None:
    db = home / "m.db"
    fill(db, "shop")
    blog = tmp_path / "blog"
    (blog / ".git").mkdir(parents=True)
    setup(home, "claude-code", "--project", str(blog), "--db", str(db), "--model", model())
    p = check(home, blog)
    assert p.returncode == 1
    assert "recalls `blog` and `shared` from here, and the database holds nothing there" in p.stdout
    assert "`shop` (2)" in p.stdout and "--scope NAME" in p.stdout
    # pinned to the right scope, the same check passes
    setup(
        home,
        "claude-code",
        "--project",
        str(blog),
        "--db",
        str(db),
        "--model",
        model(),
        "--scope",
        "shop",
    )
    assert check(home, blog).returncode == 0


def test_check_without_a_hook(home: Path, project: Path) -> None:
    p = check(home, project)
    assert p.returncode == 1 and "no sqlite-rrf prompt hook" in p.stdout
    assert "fix: sqlite-rrf setup claude-code" in p.stdout


def test_server_forms_name_the_token_each_hosts_way(home: Path, project: Path) -> None:
    url = "http://10.1.2.3:8765"  # not loopback: the server needs its bearer token
    common = ["--url", url, "--db", str(home / "m.db"), "--no-model"]
    setup(home, "systemd", *common)
    unit = (home / ".config" / "systemd" / "user" / "sqlite-rrf.service").read_text()
    assert "PassEnvironment=SQLITE_RRF_TOKEN" in unit and "--http 10.1.2.3:8765" in unit
    for host in ("claude-code", "cursor", "gemini"):
        setup(home, host, "--server", "--project", str(project), *common)
    hook = hook_of(project / ".claude" / "settings.json")
    assert hook["headers"] == {"Authorization": "Bearer $SQLITE_RRF_TOKEN"}
    assert hook["allowedEnvVars"] == ["SQLITE_RRF_TOKEN"] and hook["url"] == url + "/hook"

    def server(rel: str) -> Any:
        return json.loads((project / rel).read_text())["mcpServers"]["memory"]

    assert server(".mcp.json") == {
        "type": "http",
        "url": url + "/s/shop/mcp",
        "headers": {"Authorization": "Bearer ${SQLITE_RRF_TOKEN}"},
    }
    assert server(".cursor/mcp.json") == {
        "url": url + "/s/shop/mcp",
        "headers": {"Authorization": "Bearer ${env:SQLITE_RRF_TOKEN}"},
    }
    assert server(".gemini/settings.json") == {
        "httpUrl": url + "/s/shop/mcp",
        "headers": {"Authorization": "Bearer ${SQLITE_RRF_TOKEN}"},
    }


def test_a_linked_settings_file_stays_linked_and_keeps_its_mode(home: Path, project: Path) -> None:
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "claude-settings.json"
    target.write_text('{"model": "opus"}\n')
    target.chmod(0o600)
    (home / ".claude").mkdir()
    link = home / ".claude" / "settings.json"
    link.symlink_to(target)
    args = ["claude-code", "--user", "--db", str(home / "m.db"), "--no-model"]
    setup(home, *args)
    assert link.is_symlink() and os.readlink(link) == str(target)
    data = json.loads(target.read_text())
    assert data["model"] == "opus" and "UserPromptSubmit" in data["hooks"]
    assert (target.stat().st_mode & 0o777) == 0o600
    assert [f.name for f in dotfiles.iterdir()] == ["claude-settings.json"]  # no temp left
    setup(home, *args, "--undo")
    assert link.is_symlink() and target.read_text() == '{"model": "opus"}\n'


CODEX_TOML = """# my Codex settings
model = "o3"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]  # keep this comment
"""


def test_codex_toml(home: Path, project: Path) -> None:
    import tomllib

    db = home / "m.db"
    path = project / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(CODEX_TOML)
    args = ["codex", "--project", str(project), "--db", str(db), "--no-model"]
    setup(home, *args)
    text = path.read_text()
    assert text.startswith(CODEX_TOML)  # every byte of the user's stays
    data = tomllib.loads(text)
    assert data["model"] == "o3" and data["mcp_servers"]["docs"]["args"] == ["-y", "docs-mcp"]
    ours = data["mcp_servers"]["memory"]
    assert os.path.basename(ours["command"]) == "sqlite-rrf" and ours["args"] == ["mcp", str(db)]
    assert "unchanged" in setup(home, *args).stdout and path.read_text() == text
    # other options: the table is rewritten in place
    setup(home, *args, "--scope", "shop")
    assert tomllib.loads(path.read_text())["mcp_servers"]["memory"]["args"][-2:] == [
        "--scope",
        "shop",
    ]
    setup(home, *args, "--undo")
    assert path.read_text() == CODEX_TOML
    # edited by the user since: only setup's table goes
    setup(home, *args)
    path.write_text(path.read_text() + '\n[profiles.fast]\nmodel = "o4-mini"\n')
    setup(home, *args, "--undo")
    after = tomllib.loads(path.read_text())
    assert "memory" not in after["mcp_servers"] and after["profiles"]["fast"]["model"] == "o4-mini"
    assert path.read_text().startswith(CODEX_TOML)


def test_codex_refusals_and_the_server_form(home: Path, project: Path) -> None:
    import tomllib

    path = project / ".codex" / "config.toml"
    path.parent.mkdir()
    common = ["--project", str(project), "--db", str(home / "m.db"), "--no-model"]
    theirs = '[mcp_servers.memory]\ncommand = "other-memory"\n'
    path.write_text(theirs)
    p = setup(home, "codex", *common, ok=False)
    assert p.returncode == 1 and "not sqlite-rrf's; pass --name OTHER" in p.stderr
    assert path.read_text() == theirs
    inline = 'mcp_servers = { docs = { command = "npx" } }\n'
    path.write_text(inline)
    p = setup(home, "codex", *common, ok=False)
    assert (
        p.returncode == 1 and "add this yourself" in p.stderr and "[mcp_servers.memory]" in p.stderr
    )
    assert path.read_text() == inline
    path.write_text("")
    url = "http://10.1.2.3:8765"
    setup(home, "systemd", "--url", url, *common)
    setup(home, "codex", "--server", "--url", url, *common)
    assert tomllib.loads(path.read_text())["mcp_servers"]["memory"] == {
        "url": url + "/s/shop/mcp",
        "bearer_token_env_var": "SQLITE_RRF_TOKEN",
    }


@needs_model
def test_check_catches_an_mcp_server_of_another_database(home: Path, project: Path) -> None:
    db = home / "m.db"
    fill(db, "shop")
    setup(home, "claude-code", "--project", str(project), "--db", str(db), "--model", model())
    p = check(home, project)
    assert p.returncode == 0 and "'memory' serves the hook's database" in p.stdout, p.stdout
    mcp = project / ".mcp.json"
    data = json.loads(mcp.read_text())
    data["mcpServers"]["memory"]["args"][1] = str(home / "other.db")
    mcp.write_text(json.dumps(data))
    p = check(home, project)
    assert p.returncode == 1
    assert (
        f"the MCP server 'memory' serves {home / 'other.db'}, the hook recalls from {db}"
        in p.stdout
    )


def test_the_project_is_the_git_work_trees_top(home: Path, project: Path) -> None:
    sub = project / "src" / "pkg"
    sub.mkdir(parents=True)
    setup(home, "claude-code", "--db", str(home / "m.db"), "--no-model", cwd=sub)
    assert (project / ".claude" / "settings.json").exists() and (project / ".mcp.json").exists()
    assert not (sub / ".claude").exists()
    p = setup(home, "--check", cwd=sub, ok=False)
    assert str(project / ".claude" / "settings.json") + ":" in p.stdout
