"""Bearer tokens (S6, S9): ``--tenant-tokens`` reads ``#`` as a comment only at the start of
a line (a token may hold one), and every token, there and in ``--token-file``, has at least
MIN_TOKEN_CHARS characters, a shorter one refused naming its line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.test_server import env_for
from tests.test_tenants import raw_request, server

from sqlite_rrf.app import UserError
from sqlite_rrf.serve.settings import MIN_TOKEN_CHARS
from sqlite_rrf.serve.tenants import read_tenant_tokens

CAROL = "k#9fJ2xQ7vLm3Zp8Rt"  # a token with a '#' in it


def test_a_hash_inside_a_token_is_part_of_it(tmp_path):
    f = tmp_path / "tokens"
    f.write_text(
        f"# tenant token\ncarol {CAROL}\n   # an indented comment\n\ndave dave-token-0123456789\n"
    )
    assert read_tenant_tokens(str(f)) == {"carol": CAROL, "dave": "dave-token-0123456789"}


@pytest.mark.parametrize(
    "line, says",
    [
        ("carol k", "line 2 (tenant 'carol'): the token has 1 characters; at least 16"),
        ("carol short-token", "line 2 (tenant 'carol'): the token has 11 characters"),
        (f"carol {CAROL} # a comment after it", "line 2: expected 'TENANT TOKEN'"),
    ],
)
def test_a_short_token_or_a_trailing_comment_is_refused_naming_the_line(tmp_path, line, says):
    f = tmp_path / "tokens"
    f.write_text(f"# tenant token\n{line}\n")
    with pytest.raises(UserError, match=None) as e:
        read_tenant_tokens(str(f))
    assert says in str(e.value), str(e.value)
    assert MIN_TOKEN_CHARS >= 16


def test_the_server_lets_in_the_whole_token_only(tmp_path):
    """The line ``carol k#9fJ2…``: ``Bearer k`` was let in; only the whole token opens
    carol's endpoint now."""
    env = env_for(tmp_path)
    tenants = tmp_path / "tenants"
    tenants.mkdir()
    (tmp_path / "tokens").write_text(f"carol {CAROL}\n")
    with server(
        env, "--dir", str(tenants), "--create-tenants", "--tenant-tokens", str(tmp_path / "tokens")
    ) as (_proc, port):
        bad, _ = raw_request(port, "POST", "/t/carol/mcp", {"Authorization": "Bearer k"})
        good, _ = raw_request(port, "POST", "/t/carol/mcp", {"Authorization": f"Bearer {CAROL}"})
    assert bad == 401
    assert good != 401


def test_serve_refuses_a_short_tenant_token_naming_the_line(tmp_path):
    env = env_for(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "tokens").write_text("# tenants\nacme tooshort\n")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sqlite_rrf",
            "serve",
            "--dir",
            str(tmp_path / "d"),
            "--http",
            "1",
            "--tenant-tokens",
            str(tmp_path / "tokens"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode != 0
    assert "line 2 (tenant 'acme'): the token has 8 characters; at least 16" in p.stderr, p.stderr


def test_serve_refuses_a_short_token_file(tmp_path):
    env = env_for(tmp_path)
    (tmp_path / "token").write_text("admin\n")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sqlite_rrf",
            "serve",
            str(tmp_path / "m.db"),
            "--http",
            "1",
            "--token-file",
            str(tmp_path / "token"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode != 0
    assert "--token-file: " in p.stderr and "the token has 5 characters" in p.stderr, p.stderr
