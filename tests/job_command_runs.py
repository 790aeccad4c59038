"""The job command's main run the way its tests run it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from job_command.cli import main
from job_command.seams import Seams


def command_runner(capfd: pytest.CaptureFixture[str]) -> Callable[[list[str], Seams], tuple[int, str, str]]:
    """main(argv, seams) -> (exit status, stdout, stderr). capfd, not redirect_stdout: planning a
    stack arms faulthandler, which needs the process's real stderr."""
    def call(argv: list[str], seams: Seams) -> tuple[int, str, str]:
        capfd.readouterr()
        code = main(argv, seams)
        captured = capfd.readouterr()
        return code, captured.out, captured.err
    return call
