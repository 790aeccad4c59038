#!/usr/bin/env python3
"""Pulumi.yaml's `config:` block and the key table of docs/configuration-errors.md, from the key
table components/config/keys.py.

    .venv/bin/python scripts/config_docs.py --write   # after editing the table
    .venv/bin/python scripts/config_docs.py --check   # exit 1 naming each file that differs

tests/test_config_keys.py runs the same check, so a table edit without --write fails the tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from offline.project_venv import require  # noqa: E402

require("config_docs.py")  # the config model reads YAML

from components.config.key_docs import rendered_errors_doc, rendered_pulumi_yaml  # noqa: E402
from offline.generated_files import write_or_check  # noqa: E402

RENDERED = {ROOT / "Pulumi.yaml": rendered_pulumi_yaml, ROOT / "docs" / "configuration-errors.md": rendered_errors_doc}


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, description=__doc__.splitlines()[0] if __doc__ else "", root=ROOT, renders=RENDERED,
                          source="components/config/keys.py", command="scripts/config_docs.py")


if __name__ == "__main__":
    sys.exit(main())
