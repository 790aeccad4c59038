#!/usr/bin/env python3
"""The policy pack's configuration for one stack, from the stack's own config.

    scripts/policy_config.py STACK [--output FILE]   # the code and its full description: offline/policy_config.py
"""

import sys

from _repository_root import import_from_repository_root  # scripts/: on the path run as a file

import_from_repository_root("policy_config.py")  # before the first import of the Pulumi SDK

from offline.policy_config import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
