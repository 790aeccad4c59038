#!/usr/bin/env python3
"""The generated parts of docs/ (plan summaries, the sample plan diff), from the code that prints them.

    .venv/bin/python scripts/doc_figures.py --write   # after a change that moves a figure
    .venv/bin/python scripts/doc_figures.py --check   # exit 1 naming each page that differs

It plans the stacks it needs offline (a few seconds each). tests/test_doc_figures.py runs the same
check on the plans its session already made, so a figure that moved fails the tests until --write.
The parts and how each is made: offline/doc_figures.py.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from offline.project_venv import require  # noqa: E402

require("doc_figures.py")  # it plans stacks: the Pulumi SDK

from offline.doc_figures import PAGES, DocFigureError, render_page  # noqa: E402
from offline.plan import synthesize  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the generated parts of the pages")
    mode.add_argument("--check", action="store_true", help="exit 1 if a page differs from what the code prints")
    args = parser.parse_args(argv)
    plan_of = functools.cache(synthesize)
    stale = []
    for page in PAGES:
        current = page.read_text()
        try:
            wanted = render_page(current, plan_of)
        except DocFigureError as error:
            print(f"{page.relative_to(ROOT)}: {error}", file=sys.stderr)
            return 2
        if wanted == current:
            continue
        if args.write:
            page.write_text(wanted)
        else:
            stale.append(page.relative_to(ROOT))
    for page in stale:
        print(f"{page}: differs from what the code prints. Fix: run scripts/doc_figures.py --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
