#!/usr/bin/env python3
"""Pulumi.yaml's `config:` block and the key table of docs/configuration-errors.md, from the key
table components/config/keys.py.

    .venv/bin/python scripts/config_docs.py --write   # after editing the table
    .venv/bin/python scripts/config_docs.py --check   # exit 1 naming each file that differs

tests/test_config_keys.py runs the same check, so a table edit without --write fails the tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from offline.project_venv import require  # noqa: E402

require("config_docs.py")  # the config model reads YAML

from components.config.key_docs import rendered_errors_doc, rendered_pulumi_yaml  # noqa: E402

RENDERED = {ROOT / "Pulumi.yaml": rendered_pulumi_yaml, ROOT / "docs" / "configuration-errors.md": rendered_errors_doc}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the generated parts of both files")
    mode.add_argument("--check", action="store_true", help="exit 1 if either file differs from the table")
    args = parser.parse_args(argv)
    stale = []
    for path, render in RENDERED.items():
        current = path.read_text()
        wanted = render(current)
        if wanted == current:
            continue
        if args.write:
            path.write_text(wanted)
        else:
            stale.append(path.relative_to(ROOT))
    for path in stale:
        print(f"{path}: differs from components/config/keys.py. Fix: run scripts/config_docs.py --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
