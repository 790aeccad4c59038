"""The go-live checks in the order they run: the cluster's, then each job's (a job's later checks
are skipped when it is not admitted or has no pods). A module of its own because the checks live
in three modules (checks, first_node, training_metrics), the latter two building on the first.
"""

from __future__ import annotations

from verify import first_node, training_metrics
from verify.checks import (
    Context,
    JobState,
    check_admitted,
    check_checkpoints,
    check_controllers,
    check_gpu_devices,
    check_gpu_utilisation,
    check_nodes,
    check_pods,
    check_progress,
    check_training_secret,
    guarded,
)
from verify.report import CheckResult, skipped
from verify.stack_outputs import JobPromise


def cluster_checks(ctx: Context) -> list[CheckResult]:
    return [guarded(f"cluster.{check.__name__.removeprefix('check_').replace('_', '-')}", check, ctx)
            for check in (check_nodes, check_gpu_devices, check_controllers, check_training_secret,
                          first_node.check_hugepages, first_node.check_pod_ips, first_node.check_lustre_client,
                          training_metrics.check_dashboard)]


def job_checks(ctx: Context, promise: JobPromise) -> list[CheckResult]:
    state = JobState(promise)
    results = [guarded(f"job.{promise.name}.admitted", check_admitted, ctx, state)]
    later = ("pods", "progress", "loss-metric", "checkpoints", "gpu-utilisation", "fabric", "in-pod")
    if not state.admitted:
        return results + [skipped(f"job.{promise.name}.{c}", "the job is not admitted") for c in later]
    results.append(guarded(f"job.{promise.name}.pods", check_pods, ctx, state))
    if not state.pods:
        return results + [skipped(f"job.{promise.name}.{c}", "the job has no pods") for c in later[1:]]
    results += [guarded(f"job.{promise.name}.{suffix}", check, ctx, state) for suffix, check in
                (("progress", check_progress), ("loss-metric", training_metrics.check_loss_metric),
                 ("checkpoints", check_checkpoints),
                 ("gpu-utilisation", check_gpu_utilisation), ("fabric", first_node.check_fabric),
                 ("in-pod", first_node.check_in_pod))]
    return results

