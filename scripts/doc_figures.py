#!/usr/bin/env python3
"""The generated parts of docs/ (plan summaries, the sample plan diff), from the code that prints them.

    .venv/bin/python scripts/doc_figures.py --write   # after a change that moves a figure
    .venv/bin/python scripts/doc_figures.py --check   # exit 1 naming each page that differs

It plans the stacks it needs offline (a few seconds each). tests/test_doc_figures.py runs the same
check on the plans its session already made, so a figure that moved fails the tests until --write.
The parts and how each is made: offline/doc_figures.py.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from offline.project_venv import require  # noqa: E402

require("doc_figures.py")  # it plans stacks: the Pulumi SDK

from offline.doc_figures import FIGURES, PAGES, render_page  # noqa: E402
from offline.generated_files import write_or_check  # noqa: E402
from offline.plan import synthesize  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    plan_of = functools.cache(synthesize)
    return write_or_check(argv, description=__doc__.splitlines()[0] if __doc__ else "", root=ROOT,
                          renders={**{page: functools.partial(render_page, plan_of=plan_of) for page in PAGES},
                                   **{path: lambda _current, figure=figure: figure.render(plan_of)
                                      for path, figure in FIGURES.items()}},
                          source="what the code prints", command="scripts/doc_figures.py")


if __name__ == "__main__":
    sys.exit(main())
