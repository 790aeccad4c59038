#!/usr/bin/env python3
"""The policy pack's configuration for one stack, from the stack's own config.

    scripts/policy_config.py STACK [--output FILE]   # the code and its full description: offline/policy_config.py
"""

import sys
from pathlib import Path

# Run as a file, Python puts scripts/ on the path, not the repository root that holds the package.
ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from offline.project_venv import require  # noqa: E402

require("policy_config.py")  # before the first import of the Pulumi SDK

from offline.policy_config import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
