#!/usr/bin/env python3
"""What a stack costs: the breakdown of its offline plan at the prices of components/facts/prices.py.

    scripts/cost.py --stack prod         # see --help; the code and its full description: offline/cost.py
"""

import sys
from pathlib import Path

# Run as a file, Python puts scripts/ on the path, not the repository root that holds the package.
ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from offline.project_venv import require  # noqa: E402

require("cost.py")  # before the first import of the Pulumi SDK

from offline.cost import main  # noqa: E402
from offline.plan import exit_now  # noqa: E402

if __name__ == "__main__":
    exit_now(main())
