"""A capacity block's end: its queues stop admitting before it, and admit again after it.

What AWS does at a block's end:
- EC2 "starts shutting down the instances 30 minutes before reservation end time", so EKS puts a
  scheduled action on a CAPACITY_BLOCK managed node group that scales it to 0 "40 minutes prior to
  their reservation end", named "Amazon EKS Node Group Capacity Scaledown Before Reservation End"
  (EKS User Guide, ml/capacity-blocks-mng.adoc, last step). The EC2 User Guide
  (capacity-blocks-monitor) says the same from its side: 40 minutes before the end an EventBridge
  event says the instances "will begin to terminate in 10 minutes".
- Kueue knows none of it: it would admit a gang onto the block's flavor up to the end, and the
  gang would be drained before it ever became Ready.

What the platform does (one decision per point, the sources above):
- **Hold, at end - (40 min + PODS_READY_TIMEOUT)**: a CronJob sets `stopPolicy: Hold` on every
  ClusterQueue with the block's flavor (capacity_block_script.py). A gang admitted later could not
  be Ready (its node provisioning plus its startup budget: controllers.py) before EKS scales the
  pool to 0. `Hold`, not `HoldAndDrain`: a queue holds every pool's flavor, and `HoldAndDrain`
  evicts every admitted workload of the queue (kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go
  stopPolicy), the gangs on the other pools included. The gang running on the block is stopped by
  AWS's own scale-down and termination, which the pool's kubelet graceful shutdown turns into a
  SIGTERM with its grace (config/node_pools.py shutdownGracePeriodSeconds): it saves a checkpoint.
- **Resume, at the end**: the same queues (only those the hold marked) get `stopPolicy: None`.
- **Release, the day after**: config/node_pools.py release_ended_blocks plans the pool with no
  nodes and its flavor with no quota (a pulumi up with min/desired above 0 would fight EKS's
  scale-down), and warns until the pool is removed or given its next block.

Why a CronJob and not a plan-time switch: the hold must happen at a time of day, with nobody at a
terminal; a plan can only change what the next `pulumi up` applies. The CronJob's schedule is in
UTC (`timeZone: Etc/UTC`, stable since Kubernetes 1.27); it has no year, so the script acts only
within its window and its yearly repeat does nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pulumi

from components.common.manifests import built_in_object, job_spec
from components.config import NodePoolConfig
from components.workload.controllers import PODS_READY_TIMEOUT_SECONDS
from components.workload.multikueue import KUEUE_NAMESPACE, ROTATION_IMAGE, api_script_pod
from components.workload.queues import flavor_name

HOLD = "capacity-block-hold"
SCRIPT = Path(__file__).with_name("capacity_block_script.py")
SCRIPT_DIR = "/opt/capacity-block"
# EKS scales a CAPACITY_BLOCK node group to 0 this long before the block's end (EKS User Guide,
# capacity-blocks-mng); EC2 terminates its instances from 30 minutes before it.
EKS_SCALEDOWN_LEAD = timedelta(minutes=40)
HOLD_LEAD = EKS_SCALEDOWN_LEAD + timedelta(seconds=PODS_READY_TIMEOUT_SECONDS)
# A run may start this late (a controller restart, a node roll): the script's own window decides
# whether it still acts. The hold acts until the end, the resume for a day after it.
STARTING_DEADLINE_SECONDS = 3600
RESUME_WINDOW_SECONDS = 86400


@dataclass(frozen=True)
class BlockSchedule:
    pool: str
    flavor: str
    hold_at: datetime
    end: datetime


def block_schedules(pools: Sequence[NodePoolConfig]) -> list[BlockSchedule]:
    """The capacity blocks the cluster must still act on (a released one has ended: nothing to hold)."""
    return [BlockSchedule(p.name, flavor_name(p), p.capacity_block_end - HOLD_LEAD, p.capacity_block_end)
            for p in pools if p.capacity_block_end is not None and not p.released]


def cron_at(when: datetime) -> str:
    """The CronJob schedule of one minute of the year (UTC): minute hour day-of-month month."""
    return f"{when.minute} {when.hour} {when.day} {when.month} *"


def _cronjob(name: str, *, at: datetime, window_s: int, flavor: str, stop_policy: str, system_pool: str) -> dict[str, Any]:
    env = {"FLAVOR": flavor, "STOP_POLICY": stop_policy, "AT": at.isoformat(), "WINDOW_S": str(window_s)}
    pod = api_script_pod(account=HOLD, container="hold", image=ROTATION_IMAGE, script_dir=SCRIPT_DIR,
                         script="hold.py", env=env, system_pool=system_pool)
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": KUEUE_NAMESPACE},
            "spec": {"schedule": cron_at(at), "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
                     "startingDeadlineSeconds": STARTING_DEADLINE_SECONDS, "successfulJobsHistoryLimit": 1,
                     "failedJobsHistoryLimit": 3,
                     "jobTemplate": {"spec": job_spec(labels={"app.kubernetes.io/name": HOLD}, pod_spec=pod,
                                                      backoff_limit=3, deadline_seconds=600)}}}


def hold_manifests(pools: Sequence[NodePoolConfig], *, system_pool: str) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole (ClusterQueues: get, list, patch), its binding, the script's
    ConfigMap, and a hold and a resume CronJob per block; nothing without a block to act on."""
    schedules = block_schedules(pools)
    if not schedules:
        return []
    meta = {"name": HOLD, "namespace": KUEUE_NAMESPACE}
    cronjobs = [_cronjob(f"{HOLD}-{s.pool}", at=s.hold_at, window_s=int(HOLD_LEAD.total_seconds()), flavor=s.flavor,
                         stop_policy="Hold", system_pool=system_pool) for s in schedules]
    cronjobs += [_cronjob(f"capacity-block-resume-{s.pool}", at=s.end, window_s=RESUME_WINDOW_SECONDS,
                          flavor=s.flavor, stop_policy="None", system_pool=system_pool) for s in schedules]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        # ClusterQueues are cluster-scoped, and which queues hold a flavor is only known in the
        # cluster (team stacks add theirs): list and patch them, nothing else.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": HOLD},
         "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get", "list", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": HOLD},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": HOLD},
         "subjects": [{"kind": "ServiceAccount", "name": HOLD, "namespace": KUEUE_NAMESPACE}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"hold.py": SCRIPT.read_text()}},
        *cronjobs,
    ]


def create_capacity_block_hold(name: str, pools: Sequence[NodePoolConfig], *, system_pool: str,
                               opts: pulumi.ResourceOptions) -> None:
    for manifest in hold_manifests(pools, system_pool=system_pool):
        built_in_object(f"{name}-{manifest['kind'].lower()}-{manifest['metadata']['name']}", manifest, opts)

