#!/usr/bin/env python3
"""Whether a team stack's `pulumi up` would delete objects the platform now owns.

    scripts/_team_state_guard.py STACK STATE_JSON      # the code and its full description: offline/team_state_guard.py
"""

import sys

from _repository_root import import_from_repository_root  # scripts/: on the path run as a file

import_from_repository_root()

from offline.team_state_guard import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
