"""Removes the checkpoint directories of finished jobs from the shared file system.

The checkpoint cleanup CronJob runs this file (mounted from a ConfigMap) with the trainer
image's Python; it imports only the standard library. Layout it works on: one directory per job
under the stack that owns the runs, /workspace/checkpoints/<stack>/<job name> (TRAIN_CHECKPOINT_DIR of
components/workload/training_job.py); CHECKPOINT_ROOT is /workspace/checkpoints/<stack>, so the
runs of the environment's other stacks, which replication brings here, are never judged. A root
that does not exist yet (no run of this stack has saved) has nothing to remove.

A directory goes only when all of these hold:
- its name is a job name (a DNS label): anything else on the file system is not ours to judge;
- it is a real directory, not a symlink;
- no unfinished JobSet of that name exists in the namespace. A JobSet is finished when its
  `Completed` or `Failed` condition is True. Queued (suspended by Kueue), starting, running and
  restarting gangs are unfinished: their directory stays, however old;
- nothing in it (the directory, its entries and theirs) changed for `afterDays`.

How a run goes: list the JobSets (a failure removes nothing), decide for every directory, log
every decision, then (unless DRY_RUN) remove, asking the API once more about each job just
before its directory goes. Exit 1 if anything could not be decided or removed.

Settings (environment): CHECKPOINT_ROOT, NAMESPACE, MAX_AGE_DAYS, DRY_RUN (true|false),
TOKEN_DIR (projected service account token and CA), KUBERNETES_SERVICE_HOST/PORT.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

JOB_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
FINISHED_CONDITIONS = ("Completed", "Failed")
JOBSETS_PATH = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"
SECONDS_PER_DAY = 86400
API_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class Directory:
    name: str
    newest_change: float
    """Newest modification time (epoch seconds) of the directory, its entries and theirs."""
    is_plain_directory: bool = True


@dataclass(frozen=True)
class Decision:
    name: str
    remove: bool
    reason: str


def is_finished(jobset: Mapping[str, Any]) -> bool:
    status = jobset.get("status") or {}
    if status.get("terminalState") in FINISHED_CONDITIONS:
        return True
    return any(c.get("type") in FINISHED_CONDITIONS and c.get("status") == "True" for c in status.get("conditions") or ())


def unfinished_jobs(jobset_list: Mapping[str, Any]) -> frozenset[str]:
    """Names of the JobSets in a `JobSetList` that have not finished."""
    return frozenset(item["metadata"]["name"] for item in jobset_list.get("items") or () if not is_finished(item))


def select(directories: Iterable[Directory], *, unfinished: Collection[str], now: float,
           max_age_days: float) -> list[Decision]:
    """Which checkpoint directories go, and why each one goes or stays. Pure: no I/O."""
    decisions = []
    for directory in sorted(directories, key=lambda d: d.name):
        age_days = (now - directory.newest_change) / SECONDS_PER_DAY
        if not JOB_NAME.fullmatch(directory.name):
            keep = "not a job directory (the name is not a job name)"
        elif not directory.is_plain_directory:
            keep = "not a plain directory (a file or a symlink)"
        elif directory.name in unfinished:
            keep = "its JobSet has not finished (queued, running or restarting)"
        elif age_days < 0:
            keep = "changed in the future (clock skew): cannot judge its age"
        elif age_days < max_age_days:
            keep = f"changed {age_days:.1f} days ago, within {max_age_days:g} days"
        else:
            decisions.append(Decision(directory.name, True,
                                      f"job finished or gone, unchanged for {age_days:.1f} days (>= {max_age_days:g})"))
            continue
        decisions.append(Decision(directory.name, False, keep))
    return decisions


# --- file system ---------------------------------------------------------------------------------

def newest_change(path: str, depth: int = 2) -> float:
    """Newest mtime of `path` and of its entries down to `depth` levels, without following links.

    A checkpoint is a step directory of files (written once); a new step or a pruned one changes
    the job directory itself, so two levels see every write of the launcher's protocol."""
    newest = os.lstat(path).st_mtime
    if depth == 0:
        return newest
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                newest = max(newest, newest_change(entry.path, depth - 1))
            else:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
    return newest


def scan(root: str) -> list[Directory]:
    found = []
    with os.scandir(root) as entries:
        for entry in entries:
            plain = entry.is_dir(follow_symlinks=False)
            changed = newest_change(entry.path) if plain else entry.stat(follow_symlinks=False).st_mtime
            found.append(Directory(entry.name, changed, plain))
    return found


# --- Kubernetes API ------------------------------------------------------------------------------

def api_get(path: str, token_dir: str) -> dict[str, Any] | None:
    """GET a path of the Kubernetes API with the pod's projected token; None on 404."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    with open(os.path.join(token_dir, "token")) as token_file:
        token = token_file.read().strip()
    context = ssl.create_default_context(cafile=os.path.join(token_dir, "ca.crt"))
    request = urllib.request.Request(f"https://{host}:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT_SECONDS, context=context) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def run(*, root: str, namespace: str, max_age_days: float, dry_run: bool,
        get: Callable[[str], dict[str, Any] | None], remove: Callable[[str], None] = shutil.rmtree,
        clock: Callable[[], float] = time.time, log: Callable[[str], None] = print) -> int:
    """One cleanup pass; returns the exit code. The API and the removal are passed in for tests."""
    jobsets_path = JOBSETS_PATH.format(namespace=namespace)
    listed = get(jobsets_path)
    if listed is None:
        log(f"error: {jobsets_path} not found (is JobSet installed?); nothing removed")
        return 1
    unfinished = unfinished_jobs(listed)
    if not os.path.isdir(root):
        log(f"checkpoint cleanup of {root} in namespace {namespace}: no such directory (no run of this stack "
            "has saved a checkpoint yet); nothing to remove")
        return 0
    decisions = select(scan(root), unfinished=unfinished, now=clock(), max_age_days=max_age_days)
    going = [d for d in decisions if d.remove]
    mode = "dry run, nothing is removed" if dry_run else "removing"
    log(f"checkpoint cleanup of {root} in namespace {namespace}: {len(decisions)} entries, "
        f"{len(unfinished)} unfinished JobSets, {len(going)} to remove after {max_age_days:g} days ({mode})")
    for decision in decisions:
        log(f"{'remove' if decision.remove else 'keep  '} {decision.name}: {decision.reason}")
    if dry_run:
        return 0
    failed = 0
    for decision in going:
        path = os.path.join(root, decision.name)
        try:
            # The last word before anything is deleted: the job may have been resubmitted since
            # the list, and the directory may have been written to.
            jobset = get(f"{jobsets_path}/{decision.name}")
            if jobset is not None and not is_finished(jobset):
                log(f"kept   {decision.name}: its JobSet was (re)started during this run")
                continue
            recheck = select([Directory(decision.name, newest_change(path))], unfinished=(), now=clock(),
                             max_age_days=max_age_days)
            if not recheck[0].remove:
                log(f"kept   {decision.name}: {recheck[0].reason}")
                continue
            remove(path)
            log(f"removed {decision.name}")
        except Exception as error:  # one directory's failure must not stop the others
            failed += 1
            log(f"error: {decision.name}: {error}")
    return 1 if failed else 0


def main() -> int:
    token_dir = os.environ.get("TOKEN_DIR", "/var/run/secrets/kubernetes.io/serviceaccount")
    try:
        return run(root=os.environ.get("CHECKPOINT_ROOT", "/workspace/checkpoints"),
                   namespace=os.environ["NAMESPACE"], max_age_days=float(os.environ["MAX_AGE_DAYS"]),
                   dry_run=os.environ.get("DRY_RUN", "true").lower() != "false",
                   get=lambda path: api_get(path, token_dir))
    except Exception as error:  # the listing or the scan failed: nothing was removed
        print(f"error: {type(error).__name__}: {error}; nothing removed", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
