"""The directory the launcher puts first on the workers' PYTHONPATH, so that its `sitecustomize`
runs at the start of every worker (see sitecustomize.py here): liveness from optimizer steps,
the collective-timeout bound and config errors, for any PyTorch trainer without a line of code."""

from __future__ import annotations

import os

SITE_DIR = os.path.dirname(os.path.abspath(__file__))
# The directory that holds the `launcher` package, so the workers import the same launcher.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(SITE_DIR))


def python_path(existing: str) -> str:
    """`existing` PYTHONPATH with the site directory first and, for a launcher run from a source
    tree, the launcher's own parent last. An installed launcher's parent is site-packages, which
    the workers have anyway: on PYTHONPATH it would come before the standard library."""
    installed = os.path.basename(PACKAGE_PARENT) in ("site-packages", "dist-packages")
    entries = [p for p in existing.split(os.pathsep) if p and p not in (SITE_DIR, PACKAGE_PARENT)]
    return os.pathsep.join([SITE_DIR, *entries, *([] if installed else [PACKAGE_PARENT])])
