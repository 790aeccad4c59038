"""The example trainer, with every checkpoint file write taking SLOW_WRITE_S seconds longer: a
large state on a slow shared file system, at the size of a test. Run through the launcher as
the training command (test_trainer_runs.py)."""

import os
import runpy
import time

from launcher import state_file

_write_snapshot = state_file.write_snapshot


def _slow_write_snapshot(fd: int, snapshot: state_file.Snapshot) -> dict:
    time.sleep(float(os.environ["SLOW_WRITE_S"]))
    return _write_snapshot(fd, snapshot)


state_file.write_snapshot = _slow_write_snapshot
runpy.run_module("example_trainer.train", run_name="__main__", alter_sys=True)  # exits the process
