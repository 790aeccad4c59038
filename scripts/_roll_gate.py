#!/usr/bin/env python3
"""Which GPU node groups a `pulumi up` rolls, and whether a non-spot gang runs on them.

    scripts/_roll_gate.py rolled PREVIEW_JSON                 # the code and its full description: offline/roll_gate.py
    scripts/_roll_gate.py check PREVIEW_JSON NODES_JSON PODS_JSON [--allow-gang-roll]
"""

import sys
from pathlib import Path

# Run as a file, Python puts scripts/ on the path, not the repository root that holds the package.
ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from offline.roll_gate import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
