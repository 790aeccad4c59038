"""Holds the Kueue ClusterQueues that admit to a capacity block's pool before the block ends, and
lets them admit again once it has ended.

Run by two CronJobs per capacityBlock pool (workload/capacity_block.py), at the times the stack file's
`capacityBlockEnd` gives; standard library only. A CronJob's schedule has no year, so each run
acts only inside its window (AT to AT + WINDOW_S): the same date a year later does nothing.

- STOP_POLICY=Hold: every ClusterQueue with the pool's flavor whose stopPolicy is unset or None gets
  `spec.stopPolicy: Hold` and an annotation naming the flavor. Kueue then admits nothing new there,
  and "already admitted workloads" run on (kueue v0.19.2 site/content/en/docs/concepts/cluster_queue.md,
  "StopPolicy"; apis/kueue/v1beta2/clusterqueue_types.go). A queue an operator stopped is left alone.
- STOP_POLICY=None: only the queues this script held (the annotation) get `stopPolicy: None` back.

Env: FLAVOR (the pool's ResourceFlavor), STOP_POLICY (Hold | None), AT (ISO 8601 UTC), WINDOW_S.
"""

from __future__ import annotations

import datetime
import json
import os
import ssl
import sys
import urllib.request

API = "https://kubernetes.default.svc"
API_TOKEN = "/var/run/secrets/api/token"
API_CA = "/var/run/secrets/api/ca.crt"
QUEUES = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
HELD_FOR = "gpu-training/held-for-capacity-block"
"""The annotation on a queue this script held: the flavor of the ending block."""
FIELD_MANAGER = "capacity-block-hold"


def in_window(now: datetime.datetime, at: datetime.datetime, window_s: int) -> bool:
    return at <= now < at + datetime.timedelta(seconds=window_s)


def has_flavor(queue: dict, flavor: str) -> bool:
    return any(f.get("name") == flavor for group in queue.get("spec", {}).get("resourceGroups", [])
               for f in group.get("flavors", []))


def queue_patch(queue: dict, *, flavor: str, stop_policy: str) -> dict | None:
    """The merge patch for `queue`, or None when it is not this run's to change."""
    if not has_flavor(queue, flavor):
        return None
    annotations = queue.get("metadata", {}).get("annotations") or {}
    current = queue.get("spec", {}).get("stopPolicy") or "None"
    if stop_policy == "Hold":
        if current != "None":
            return None  # stopped by someone else, maybe HoldAndDrain: not ours to soften
        return {"metadata": {"annotations": {HELD_FOR: flavor}}, "spec": {"stopPolicy": "Hold"}}
    if annotations.get(HELD_FOR) != flavor or current != "Hold":
        return None  # not held by this block's run, or stopped harder since (HoldAndDrain): whoever did resumes it
    return {"metadata": {"annotations": {HELD_FOR: None}}, "spec": {"stopPolicy": "None"}}


def _call(method: str, path: str, body: dict | None = None) -> dict:
    with open(API_TOKEN) as file:
        token = file.read().strip()
    request = urllib.request.Request(f"{API}{path}", method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=API_CA), timeout=30) as reply:
        return json.load(reply)


def main(now: datetime.datetime | None = None) -> int:
    flavor, stop_policy = os.environ["FLAVOR"], os.environ["STOP_POLICY"]
    at = datetime.datetime.fromisoformat(os.environ["AT"])
    now = now or datetime.datetime.now(datetime.UTC)
    if not in_window(now, at, int(os.environ["WINDOW_S"])):
        print(json.dumps({"event": "capacity_block_outside_window", "flavor": flavor, "at": at.isoformat()}), flush=True)
        return 0
    failed = 0
    for queue in _call("GET", QUEUES).get("items", []):
        patch = queue_patch(queue, flavor=flavor, stop_policy=stop_policy)
        if patch is None:
            continue
        name = queue["metadata"]["name"]
        try:
            _call("PATCH", f"{QUEUES}/{name}?fieldManager={FIELD_MANAGER}", patch)
            print(json.dumps({"event": "capacity_block_queue", "queue": name, "flavor": flavor,
                              "stopPolicy": stop_policy}), flush=True)
        except OSError as error:  # one queue's failure must not keep the others admitting
            failed += 1
            print(f"{name}: stopPolicy {stop_policy} not set: {type(error).__name__}: {error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
