"""A dataset that is complete before any step trains on it.

In a MultiKueue environment a worker region's `/workspace/data` fills by S3 Cross-Region
Replication from the manager's datasets bucket, object by object, in no order and with no time
bound (S3 User Guide, "Replicating objects within and across Regions": most objects within 15
minutes, some much longer, without S3 Replication Time Control). A job admitted there right after an
upload would train on part of the dataset and say nothing. So a dataset may carry a manifest
(`DATASET_MANIFEST.json` at the top of TRAIN_DATA_DIR, or the file TRAIN_DATASET_MANIFEST names):
every file with its size, the same shape as a checkpoint marker's `files`. Written last, after the
files, by whoever uploads the dataset:

    python -m launcher.dataset_manifest write /path/to/dataset   # then upload the directory, manifest last

Before torchrun starts, the launcher checks that each listed file is there with its size
(`check`): stat calls only, no reading. A dataset without a manifest is not checked.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

MANIFEST_NAME = "DATASET_MANIFEST.json"
MANIFEST_VAR = "TRAIN_DATASET_MANIFEST"
SHOWN = 3  # missing or short files named in the message


class DatasetIncompleteError(Exception):
    """The manifest lists files that are not (yet) there with their size; or it cannot be read."""


@dataclass(frozen=True)
class DatasetCheck:
    manifest: str
    files: int
    bytes: int


def manifest_path(data_dir: str, env: Mapping[str, str]) -> str:
    named = env.get(MANIFEST_VAR, "").strip()
    return os.path.join(data_dir, named or MANIFEST_NAME)


def check(data_dir: str, env: Mapping[str, str]) -> DatasetCheck | None:
    """None without a manifest; the files and bytes it lists when every file is there with its size;
    DatasetIncompleteError otherwise (and when TRAIN_DATASET_MANIFEST names a manifest that is missing)."""
    path = manifest_path(data_dir, env)
    try:
        with open(path, "rb") as f:
            document = json.loads(f.read().decode())
    except FileNotFoundError:
        if env.get(MANIFEST_VAR, "").strip():
            raise DatasetIncompleteError(f"{MANIFEST_VAR} names {path}, which does not exist (yet)") from None
        return None
    except (OSError, ValueError) as error:
        raise DatasetIncompleteError(f"{path} cannot be read as JSON: {error}") from None
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, dict) or not files:
        raise DatasetIncompleteError(f"{path} lists no files (expected {{\"files\": {{\"<path>\": {{\"bytes\": N}}}}}})")
    root = os.path.dirname(path)
    problems = []
    for name, meta in sorted(files.items()):
        want = meta.get("bytes") if isinstance(meta, dict) else None
        try:
            size = os.stat(os.path.join(root, name)).st_size
        except OSError:
            problems.append(f"{name} is missing")
            continue
        if size != want:
            problems.append(f"{name} has {size} bytes, the manifest says {want}")
    if problems:
        shown = "; ".join(problems[:SHOWN]) + (f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else "")
        raise DatasetIncompleteError(f"the dataset is incomplete: {len(problems)} of the {len(files)} files {path} lists are "
                                f"not there with their size ({shown}). In a worker region the datasets bucket may still "
                                "be replicating: resubmit the job once it has arrived")
    total = sum(meta["bytes"] for meta in files.values())
    return DatasetCheck(path, len(files), total)


def write(directory: str) -> str:
    """Write DATASET_MANIFEST.json for every file under `directory` (hidden files and the manifest
    itself left out); returns its path."""
    files = {}
    for parent, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") or (name == MANIFEST_NAME and parent == directory):
                continue
            path = os.path.join(parent, name)
            files[os.path.relpath(path, directory)] = {"bytes": os.stat(path).st_size}
    path = os.path.join(directory, MANIFEST_NAME)
    with open(path, "w") as f:
        json.dump({"files": files}, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "write":
        print("usage: python -m launcher.dataset_manifest write DIRECTORY", file=sys.stderr)
        return 2
    print(write(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
