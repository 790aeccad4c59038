#!/usr/bin/env python3
"""Which GPU node groups a `pulumi up` rolls, and whether a non-spot gang runs on them.

    scripts/_roll_gate.py rolled PREVIEW_JSON                 # the code and its full description: offline/roll_gate.py
    scripts/_roll_gate.py check PREVIEW_JSON NODES_JSON PODS_JSON [--allow-gang-roll]
"""

import sys

from _repository_root import import_from_repository_root  # scripts/: on the path run as a file

import_from_repository_root()

from offline.roll_gate import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
