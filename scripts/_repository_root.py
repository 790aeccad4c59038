"""What a Python script of scripts/ does first, run as a file: find the repository's packages.

Run as a file, Python puts scripts/ on the path (so this module imports), not the repository root
that holds the packages (offline/, components/).
"""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)


def import_from_repository_root(prog: str | None = None) -> None:
    """Put the repository root on the path; with `prog`, also make sure the project's venv runs it
    (offline/project_venv.py: re-run under .venv/bin/python, or exit 2 naming `make venv`). Call it
    before the first import of the Pulumi SDK."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    if prog is not None:
        from offline.project_venv import require

        require(prog)
