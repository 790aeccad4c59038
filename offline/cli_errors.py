"""What every command-line tool here promises on bad input: exit 2, one line per error, no
traceback, nothing half-written (see docs/configuration-errors.md)."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

USAGE_ERROR = 2


class UsageError(Exception):
    """A bad argument; the message is one line and never holds a secret value."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (argparse prints the usage block first)."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, f"{message} (see --help)")
        sys.exit(USAGE_ERROR)


def fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def replace_atomically(target: Path, write: Callable[[Path], object], *, directory: bool) -> None:
    """Have `write` fill a new file or directory beside `target`, then move it into place: on any
    failure nothing is left behind (no partial file, no directory created on the way)."""
    created = _make_parents(target.parent)
    staging = target.parent / f".{target.name}.{os.getpid()}.partial"
    try:
        _remove(staging)
        if directory:
            staging.mkdir()
        write(staging)
        if directory:
            with _directory_locked(target.parent):
                _swap_directory(staging, target)
        else:
            staging.replace(target)
    except BaseException:
        _remove(staging)
        for parent in reversed(created):
            try:
                parent.rmdir()
            except OSError:
                break
        raise


@contextlib.contextmanager
def _directory_locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive flock(2) on `directory` itself (no lock file is left behind). Two writers of
    one target (`make -j plans`, `make plan` while the parallel tests plan the same stack) swap in
    turn; unlocked, one could move the other's new directory aside between its two renames."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def _swap_directory(staging: Path, target: Path) -> None:
    """A directory cannot replace a non-empty one in one rename: retire the old one first, and put
    it back if the new one cannot go in."""
    if not target.is_dir():
        staging.rename(target)
        return
    retired = target.parent / f".{target.name}.{os.getpid()}.old"
    _remove(retired)
    target.rename(retired)
    try:
        staging.rename(target)
    except OSError:
        retired.rename(target)
        raise
    _remove(retired)


def _make_parents(directory: Path) -> list[Path]:
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    created = []
    for path in reversed(missing):
        path.mkdir()
        created.append(path)
    return created


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
