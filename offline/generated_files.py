"""Files with parts rendered from code (scripts/config_docs.py, scripts/doc_figures.py): one
`--write` / `--check` command line for both."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path


class RenderError(Exception):
    """A file whose generated part cannot be rendered (a marker missing); the message names why."""


def write_or_check(argv: list[str] | None, *, description: str, root: Path,
                   renders: Mapping[Path, Callable[[str], str]], source: str, command: str) -> int:
    """--write rewrites each file as its render gives it; --check exits 1 naming each file that
    differs from what `source` gives (2 where one cannot be rendered)."""
    parser = argparse.ArgumentParser(description=description)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the generated parts of the files")
    mode.add_argument("--check", action="store_true", help=f"exit 1 if a file differs from what {source} gives")
    args = parser.parse_args(argv)
    stale = []
    for path, render in renders.items():
        current = path.read_text()
        try:
            wanted = render(current)
        except RenderError as error:
            print(f"{path.relative_to(root)}: {error}", file=sys.stderr)
            return 2
        if wanted == current:
            continue
        if args.write:
            path.write_text(wanted)
        else:
            stale.append(path.relative_to(root))
    for path in stale:
        print(f"{path}: differs from {source}. Fix: run {command} --write", file=sys.stderr)
    return 1 if stale else 0
