#!/usr/bin/env python3
"""What a stack costs: the breakdown of its offline plan at the prices of components/facts/prices.py.

    scripts/cost.py --stack prod         # see --help; the code and its full description: offline/cost.py
"""

from _repository_root import import_from_repository_root  # scripts/: on the path run as a file

import_from_repository_root("cost.py")  # before the first import of the Pulumi SDK

from offline.cost import main  # noqa: E402
from offline.plan import exit_now  # noqa: E402

if __name__ == "__main__":
    exit_now(main())
