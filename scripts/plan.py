#!/usr/bin/env python3
"""Offline plan: run the real program under Pulumi's mock runtime and write what it would create.

    scripts/plan.py --stack dev          # see --help; the code and its full description: offline/plan.py
"""

import gc

from _repository_root import import_from_repository_root  # scripts/: on the path run as a file

import_from_repository_root("plan.py")  # before the first import of the Pulumi SDK

from offline.plan import exit_now, main  # noqa: E402

if __name__ == "__main__":
    # The whole run, not only synthesis: re-enabled after it, the collector would scan the plan's
    # objects once at the first write (0.15 s of a prod plan) and free nothing; exit_now ends the
    # process without a teardown anyway.
    gc.disable()
    exit_now(main())
