"""Exit 0 when URL answers a HEAD request within SECONDS (default 5), 1 otherwise; prints nothing.

    python scripts/_index_answers.py https://download.pytorch.org/whl/cpu/torch/ [SECONDS]

The Makefile asks it before installing torch from PyTorch's CPU index: offline or behind a proxy
that drops the connection, pip would wait its own timeout (15 s, retried 5 times) per request.
The whole probe is bounded, name resolution included (urlopen's timeout covers only the socket):
it runs in a thread the process stops waiting for. A custom CA bundle pip is told about
(PIP_CERT, as on machines behind a TLS-inspecting proxy) is used here too. Stdlib only: it runs
with the venv's python before anything is installed in it.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
import urllib.request

DEFAULT_SECONDS = 5.0


def answers(url: str, seconds: float) -> bool:
    answered: list[bool] = []

    def ask() -> None:
        context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=seconds,
                                        context=context):
                answered.append(True)
        except (OSError, ValueError):  # refused, timed out, an HTTP error status, not a URL
            pass

    probe = threading.Thread(target=ask, daemon=True)
    probe.start()
    probe.join(seconds)
    return bool(answered)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        sys.stderr.write(__doc__ or "")
        return 2
    return 0 if answers(argv[0], float(argv[1]) if len(argv) == 2 else DEFAULT_SECONDS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
