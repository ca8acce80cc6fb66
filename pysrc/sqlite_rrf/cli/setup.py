"""``sqlite-rrf setup``: wire the memory into an agent's host."""

from __future__ import annotations

import argparse


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", db_help: str) -> None:
    """Register ``setup``'s command line (not yet: see the setup work in progress)."""
