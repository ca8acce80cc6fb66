"""``python -m sqlite_rrf`` runs the ``sqlite-rrf`` command line."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
