"""The commands that talk to the cluster: submit's last step, status, logs, stop, list."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import Any

from components.cluster.pool_scheduling import POOL_LABEL
from components.config import ConfigError, ConfigProblem, TeamStackConfig
from components.config.stack_names import stack_kind, team_namespace
from components.workload.training_job import SUBMITTED_BY_JOB_COMMAND, SUBMITTED_BY_LABEL, JobObjects
from job_command.cluster import NODE_INDEX_LABEL
from job_command.price import node_hourly
from job_command.seams import Seams
from job_command.status import JobState, classify, job_status, render_json, render_text
from offline.cli_errors import fail
from offline.plan import planned_config

PROG = "gpu-training job"
EXIT_OK, EXIT_FAILED = 0, 1
# States in which a new submission may take the name (the old JobSet is deleted first; its
# checkpoints stay, so the new one resumes from them).
REPLACEABLE = (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)
CLEAR_SCREEN = "\033[H\033[2J"


def namespace_of(stack: str) -> str:
    team, _ = stack_kind(stack)
    if not team:
        raise ConfigError([ConfigProblem("--stack", f"{stack} is not a team stack",
                                         "name a team stack, team-<team>-<env> (e.g. team-vision-prod)")])
    return team_namespace(team)


def run(args: argparse.Namespace, seams: Seams) -> int:
    namespace = namespace_of(args.stack)
    if args.action == "status":
        return status(args, seams, namespace)
    cluster = seams.connect(args)
    if args.action == "logs":
        return logs(args, cluster, namespace)
    if args.action == "stop":
        return stop(args, cluster, namespace)
    return list_jobs(cluster, namespace)


def submit_objects(args: argparse.Namespace, cluster: Any, objects: JobObjects) -> int:
    metadata = objects.jobset["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    existing = cluster.jobset(namespace, name)
    if existing is not None:
        state, _ = classify(existing, cluster.workload_of(namespace, existing))
        if state not in REPLACEABLE:
            return fail(PROG, f"job {name} is {state} in namespace {namespace}; nothing was created. Fix: stop it first "
                              f"(gpu-training job stop {name} --stack {args.stack}) or give the job another name")
        print(f"job {name} was {state}: deleting that JobSet (its checkpoints stay) ...", file=sys.stderr)
        cluster.delete(namespace, name)
    # Tells an ad-hoc job from a stack's (docs/team-stacks.md): on the JobSet's metadata only, so
    # its spec stays the one the dry run printed and a stack plans.
    labels = {**metadata["labels"], SUBMITTED_BY_LABEL: SUBMITTED_BY_JOB_COMMAND}
    cluster.submit(replace(objects, jobset={**objects.jobset, "metadata": {**metadata, "labels": labels}}))
    print(f"submitted job {name} to LocalQueue {metadata['labels']['kueue.x-k8s.io/queue-name']} of namespace "
          f"{namespace}\nnext: gpu-training job status {name} --stack {args.stack} --watch\n"
          f"      gpu-training job logs {name} --stack {args.stack} --follow", file=sys.stderr)
    return EXIT_OK


def status(args: argparse.Namespace, seams: Seams, namespace: str) -> int:
    team = planned_config(args.stack)  # the platform's pools and region, for the price of a node
    if not isinstance(team, TeamStackConfig):
        raise ConfigError([ConfigProblem("--stack", f"{args.stack} is not a team stack", "name a team stack")])
    pools = {pool.name: pool for pool in team.judged_platform.node_pools}
    cluster = seams.connect(args)
    while True:
        jobset = cluster.jobset(namespace, args.name)
        workload = cluster.workload_of(namespace, jobset) if jobset else None
        pods = cluster.pods(namespace, args.name) if jobset else []
        logs = {pod["metadata"]["name"]: cluster.log(namespace, pod["metadata"]["name"]) for pod in pods}
        pool = pools.get(_pool_of(jobset))
        price = node_hourly(pool, team.region)[0] if pool else None
        report = job_status(args.name, jobset=jobset, workload=workload, pods=pods, logs=logs, now=seams.now(),
                            node_hourly_usd=price)
        text = render_json(report) if args.json else render_text(report)
        if args.watch is None:
            print(text)
            return EXIT_FAILED if report.state in (JobState.FAILED, JobState.NOT_FOUND) else EXIT_OK
        print(CLEAR_SCREEN + text, flush=True)
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:  # Ctrl-C ends the watch, as `kubectl get --watch` ends
            return EXIT_OK


def _pool_of(jobset: dict[str, Any] | None) -> str:
    try:
        pod_spec = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]  # type: ignore[index]
        return pod_spec["nodeSelector"][POOL_LABEL]
    except (KeyError, IndexError, TypeError):
        return ""


def logs(args: argparse.Namespace, cluster: Any, namespace: str) -> int:
    pods = [pod for pod in cluster.pods(namespace, args.name)
            if (pod["metadata"].get("labels") or {}).get(NODE_INDEX_LABEL) == str(args.rank)]
    if not pods:
        fail(PROG, f"job {args.name} has no pod of node {args.rank} in namespace {namespace} (waiting, stopped, "
                   f"or not there: gpu-training job status {args.name} --stack {args.stack})")
        return EXIT_FAILED
    pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""))["metadata"]["name"]
    if args.follow:
        for line in cluster.follow(namespace, pod):
            print(line, flush=True)
    else:
        print(cluster.log(namespace, pod), end="")
    return EXIT_OK


def stop(args: argparse.Namespace, cluster: Any, namespace: str) -> int:
    jobset = cluster.jobset(namespace, args.name)
    workload = cluster.workload_of(namespace, jobset) if jobset else None
    if jobset is None or workload is None:
        fail(PROG, f"no job {args.name} with a Kueue Workload in namespace {namespace} "
                   f"(gpu-training job list --stack {args.stack})")
        return EXIT_FAILED
    state, _ = classify(jobset, workload)
    if state not in (JobState.WAITING, JobState.RUNNING):
        fail(PROG, f"job {args.name} is {state}: nothing to stop (gpu-training job status {args.name} --stack {args.stack})")
        return EXIT_FAILED
    cluster.stop(namespace, workload)
    print(f"stopping job {args.name}: Kueue evicts the gang; each pod gets SIGTERM, saves a checkpoint within its "
          "grace period and exits 143.\nresume: submit the same job file again (it resumes from "
          f"/workspace/checkpoints/{args.stack}/{args.name})", file=sys.stderr)
    return EXIT_OK


def list_jobs(cluster: Any, namespace: str) -> int:
    rows = []
    for jobset in sorted(cluster.jobsets(namespace), key=lambda j: j["metadata"]["name"]):
        state, why = classify(jobset, cluster.workload_of(namespace, jobset))
        replicated = (jobset.get("spec") or {}).get("replicatedJobs") or [{}]
        nodes = ((replicated[0].get("template") or {}).get("spec") or {}).get("parallelism", "?")
        rows.append(f"{jobset['metadata']['name']:<40} {state!s:<10} {nodes!s:>5}  "
                    f"{jobset['metadata'].get('creationTimestamp', '')}  {why[0] if why else ''}")
    print(f"{'NAME':<40} {'STATE':<10} {'NODES':>5}  CREATED               WHY")
    print("\n".join(rows) if rows else f"(no jobs in namespace {namespace})")
    return EXIT_OK

