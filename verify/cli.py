"""scripts/verify: go-live checks of a deployed stack (see docs/verify.md)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from components.config.node_pools import DNS_LABEL
from components.config.stack_file import REPO_ROOT, STACK_NAME, missing_stack_fix
from components.config.training import MAX_JOB_NAME
from verify.report import CheckResult, Diagnosis, exit_code, failed, render_json, render_text, skipped
from verify.stack_outputs import JobPromise, StackOutputs, UsageError, parse_outputs, promise_of_jobset, read_outputs

EXIT_USAGE = 2

DESCRIPTION = """\
Go-live checks of a deployed stack: nodes Ready, GPUs and EFA advertised as the
pools promise, controllers available, the training secret synced; with --job, a training job
admitted by Kueue, its pods Running with no OOMKilled or restart loop, its logs showing the trainer
initialised, data loaded and the loss falling, checkpoints on schedule and GPU utilisation from
Container Insights; with --nccl, an all_reduce bandwidth test on a pool judged against the
published figure for its instance type. Every failed check prints its likely cause and the command
that shows it."""

EPILOG = """\
exit status: 0 every check passed (warnings and skips included), 1 a check failed,
2 bad usage, unreadable stack outputs, or no cluster reachable.

examples:
  scripts/verify --stack prod
  scripts/verify --stack prod --job pretrain-p5
  scripts/verify --stack team-vision-prod --job my-sweep-3      (a job submitted with `gpu-training job submit`)
  scripts/verify --stack prod --nccl p5-efa --nccl-image public.ecr.aws/hpc-cloud/nccl-tests@sha256:<digest>
  scripts/verify --stack dev --outputs build/dev/outputs.json --kubeconfig ~/.kube/config --json"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's exit code for usage errors is already 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"verify: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="scripts/verify", description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stack", required=True, help="the Pulumi stack to check (dev, staging, prod, team-<name>-<env>)")
    p.add_argument("--outputs", metavar="FILE",
                   help="read the stack's outputs from FILE (JSON of `pulumi stack output --json`, or "
                        "build/<stack>/outputs.json of the offline plan) instead of running the pulumi CLI")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="kubeconfig to use instead of the stack's `kubeconfig` output (which authenticates with "
                        "`aws eks get-token`)")
    p.add_argument("--context", help="context of the kubeconfig to use (default: its current context)")
    p.add_argument("--job", action="append", default=[], metavar="NAME",
                   help="also check this training job (repeatable): one of the stack's, or a JobSet submitted ad hoc "
                        "into its namespace (its pool, nodes and GPUs are read from the live JobSet)")
    p.add_argument("--gpu-threshold", type=float, default=80.0, metavar="PERCENT",
                   help="healthy GPU utilisation, average per pod over the window (default 80, the go-live requirement)")
    p.add_argument("--gpu-window", type=int, default=10, metavar="MINUTES",
                   help="how far back to average Container Insights' pod_gpu_utilization (default 10)")
    p.add_argument("--nccl", metavar="POOL",
                   help="run the NCCL all_reduce gate on this GPU pool (creates a JobSet in the training namespace "
                        "and deletes it afterwards)")
    p.add_argument("--nccl-image", metavar="REPO@sha256:DIGEST",
                   help="nccl-tests image pinned by digest (required with --nccl): e.g. the digest of "
                        "public.ecr.aws/hpc-cloud/nccl-tests:<tag> from `crane digest` or "
                        "`docker buildx imagetools inspect`")
    p.add_argument("--nccl-nodes", type=int, default=2, metavar="N",
                   help="nodes in the NCCL test (default 2: the published references are 2-node figures)")
    p.add_argument("--nccl-timeout", type=int, default=1800, metavar="SECONDS",
                   help="give up on the NCCL test after this long, scale-up from zero included (default 1800)")
    p.add_argument("--nccl-min-busbw", type=float, metavar="GBPS",
                   help="fail the NCCL test below this bus bandwidth at 2 GiB (overrides the reference table; "
                        "the only way to judge types without a published figure)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    return p


def _usage_problems(args: argparse.Namespace, outputs: StackOutputs) -> list[str]:
    problems = []
    for job in args.job:
        if job not in outputs.jobs and not (DNS_LABEL.fullmatch(job) and len(job) <= MAX_JOB_NAME):
            problems.append(f"--job {job[:100]}: not a job name (lower-case letters, digits and '-', at most "
                            f"{MAX_JOB_NAME} characters)")
    if args.nccl:
        pool = outputs.pools.get(args.nccl)
        gpu_pools = ", ".join(sorted(p for p, v in outputs.pools.items() if v.gpu)) or "none"
        if pool is None or not pool.gpu:
            problems.append(f"--nccl {args.nccl}: not a GPU pool of stack {args.stack} (GPU pools: {gpu_pools})")
        if not args.nccl_image:
            problems.append("--nccl needs --nccl-image REPO@sha256:DIGEST: no digest of the nccl-tests image could be "
                            "verified for this project, so you pin the one you trust")
        if args.nccl_nodes < 2:
            problems.append(f"--nccl-nodes {args.nccl_nodes}: the test needs at least 2 nodes to cross the network")
    if args.nccl_image:
        from components.config.training import IMAGE_BY_DIGEST

        if not IMAGE_BY_DIGEST.match(args.nccl_image):
            problems.append(f"--nccl-image {args.nccl_image}: must be pinned by digest (repo@sha256:<64 hex>)")
    if args.gpu_window < 1:
        problems.append(f"--gpu-window {args.gpu_window}: must be at least 1 minute")
    return problems


def main(argv: list[str] | None = None, *, now: float | None = None, cloudwatch: Any = None, ec2: Any = None,
         service_quotas: Any = None) -> int:
    """`now`, `cloudwatch`, `ec2` and `service_quotas` (client factories) exist for the offline tests."""
    args = build_parser().parse_args(argv)
    try:
        _check_stack_name(args.stack)
        data = read_outputs(args.stack, args.outputs)
        _check_outputs_are_the_stacks(args.stack, data, args.outputs)
        outputs = parse_outputs(args.stack, data)
        problems = _usage_problems(args, outputs)
        if problems:
            raise UsageError("; ".join(problems))
        results = run_checks(args, outputs, now=time.time() if now is None else now, cloudwatch=cloudwatch, ec2=ec2,
                             service_quotas=service_quotas)
    except UsageError as e:
        sys.stderr.write(f"verify: error: {e}\n")
        return EXIT_USAGE
    sys.stdout.write(render_json(args.stack, results) if args.json else render_text(args.stack, results))
    return exit_code(results)


def _check_stack_name(stack: str) -> None:
    """Every stack this repository deploys has a file in stacks/: another name is a typo (`Prod`)."""
    if STACK_NAME.fullmatch(stack) and (REPO_ROOT / "stacks" / f"Pulumi.{stack}.yaml").is_file():
        return
    raise UsageError(f"--stack {stack[:100]}: no stack file stacks/Pulumi.{stack[:100]}.yaml; {missing_stack_fix(stack)}")


def _check_outputs_are_the_stacks(stack: str, data: dict[str, Any], outputs_file: str | None) -> None:
    """The outputs name their stack: `environment` (every stack) and `team` (team stacks). Another
    stack's file (build/dev/outputs.json for prod) would check prod's cluster against dev's promises."""
    environment, team = data.get("environment"), data.get("team")
    if not isinstance(environment, str):
        return  # a program older than these outputs: parse_outputs names what it lacks
    theirs = f"team-{team}-{environment}" if isinstance(team, str) else environment
    if theirs == stack:
        return
    source = f"--outputs {outputs_file}" if outputs_file else f"`pulumi stack output --stack {stack}`"
    fix = (f"pass stack {stack}'s (`pulumi stack output --json --stack {stack} > FILE`, or build/{stack}/outputs.json)"
           if outputs_file else "check the selected backend")
    named_by = "its `environment` and `team` outputs" if isinstance(team, str) else "its `environment` output"
    raise UsageError(f"{source}: these are the outputs of stack {theirs} ({named_by}), not of {stack}: {fix}")


def run_checks(args: argparse.Namespace, outputs: StackOutputs, *, now: float, cloudwatch: Any,
               ec2: Any = None, service_quotas: Any = None) -> list[CheckResult]:
    from verify import kube

    try:
        if args.kubeconfig:
            kubeconfig, where = kube.load_kubeconfig_file(args.kubeconfig), f"--kubeconfig {args.kubeconfig}"
        elif outputs.kubeconfig is not None:
            kubeconfig, where = outputs.kubeconfig, f"the `kubeconfig` output of stack {args.stack}"
        else:
            raise UsageError(f"stack {args.stack} has no readable `kubeconfig` output: pass --kubeconfig FILE "
                             f"(`aws eks update-kubeconfig --name {outputs.cluster_name} --region {outputs.region}`)")
        cluster = kube.connect(kubeconfig, args.context, where)
    except kube.ClusterUnreachableError as e:
        raise UsageError(f"no cluster reachable: {e}") from e
    try:
        return _run(args, outputs, cluster, now=now, cloudwatch=cloudwatch, ec2=ec2, service_quotas=service_quotas)
    except kube.ClusterUnreachableError as e:
        raise UsageError(f"lost the cluster during the checks: {e}") from e


def _runner_check(outputs: StackOutputs, *, now: float, ec2: Any) -> CheckResult:
    from components.config.stack_file import project_file
    from verify import ci_runners

    return ci_runners.check_runner_tags(outputs, str(project_file()["name"]), ec2 or _aws_client("ec2", outputs.region),
                                        now)


def _aws_client(service: str, region: str) -> Callable[[], Any]:
    """Makes the boto3 client when a check first needs it (boto3 is imported only then)."""
    def make() -> Any:
        import boto3

        return boto3.client(service, region_name=region)
    return make


def _multikueue_checks(cluster: Any, outputs: StackOutputs, now: float) -> list[CheckResult]:
    """The manager's workers connected, then a probe dispatched and admitted (verify/multikueue.py)."""
    from verify import checks, multikueue

    workers = checks.guarded("multikueue.workers", lambda: multikueue.check_workers(
        cluster.cluster_custom_objects(*multikueue.KUEUE, "multikueueclusters"),
        cluster.cluster_custom_object(*multikueue.KUEUE, "admissionchecks", multikueue.ADMISSION_CHECK)))
    if workers.status.name != "PASS" or not outputs.probe_image:
        return [workers]
    return [workers, checks.guarded("multikueue.probe", multikueue.check_probe, cluster, outputs.namespace,
                                    outputs.probe_image, now=now, pool=outputs.probe_pool)]


def _job_promise(args: argparse.Namespace, outputs: StackOutputs, cluster: Any, job: str) -> JobPromise:
    """The stack's job, else a live JobSet of that name in the stack's namespace (a job submitted ad
    hoc: issue 42), whose own spec says its pool, nodes and GPUs; else bad usage."""
    if job in outputs.jobs:
        return outputs.jobs[job]
    jobset = cluster.custom_object("jobset.x-k8s.io", "v1alpha2", outputs.namespace, "jobsets", job)
    promise = promise_of_jobset(jobset) if jobset is not None else None
    if promise is not None:
        return promise
    found = "no JobSet of that name" if jobset is None else "a JobSet of that name that is not a training job's"
    raise UsageError(f"--job {job}: stack {args.stack} has no such job (its jobs: {', '.join(sorted(outputs.jobs)) or 'none'}) "
                     f"and namespace {outputs.namespace} has {found} (kubectl -n {outputs.namespace} get jobsets)")


def _quota_check(stack: str, outputs: StackOutputs, service_quotas: Any) -> CheckResult:
    """The account's EC2 vCPU quotas against the stack's pools at size.max (verify/ec2_quotas.py);
    the pools as the stack file states them (a team stack has none of its own)."""
    from components.config import ConfigError, StackConfig
    from offline.plan import planned_config
    from verify import ec2_quotas

    try:
        config = planned_config(stack)
    except ConfigError as error:  # the checkout's stack file no longer plans: say so, run the other checks
        return failed(ec2_quotas.CHECK, "the stack file does not plan, so its pools are unknown", Diagnosis(
            f"{error.problems[0].key}: {error.problems[0].rule}" if error.problems else str(error),
            f"make plan STACK={stack}"))
    if not isinstance(config, StackConfig):
        return skipped(ec2_quotas.CHECK, "a team stack launches no nodes of its own")
    make_client = service_quotas or _aws_client("service-quotas", outputs.region)
    return ec2_quotas.check_quotas(config.node_pools, lambda: ec2_quotas.applied_quotas(make_client()), outputs.region)


def _run(args: argparse.Namespace, outputs: StackOutputs, cluster: Any, *, now: float, cloudwatch: Any,
         ec2: Any, service_quotas: Any = None) -> list[CheckResult]:
    from verify import checks, suites

    ctx = checks.Context(stack=args.stack, outputs=outputs, kube=cluster,
                         cloudwatch=cloudwatch or _aws_client("cloudwatch", outputs.region),
                         now=now, gpu_threshold=args.gpu_threshold, gpu_window_minutes=args.gpu_window)
    results = [*suites.cluster_checks(ctx), _runner_check(outputs, now=now, ec2=ec2),
               _quota_check(args.stack, outputs, service_quotas)]
    if outputs.multikueue_role == "manager":
        results += _multikueue_checks(cluster, outputs, now)
    for job in args.job:
        results += suites.job_checks(ctx, _job_promise(args, outputs, cluster, job))
    if args.nccl:
        from verify import nccl_job

        run = nccl_job.NcclRun(name=nccl_job.run_name(args.nccl, now), pool=outputs.pools[args.nccl],
                               nodes=args.nccl_nodes, image=args.nccl_image)
        results.append(checks.guarded(f"nccl.{args.nccl}", nccl_job.run_gate, cluster, outputs, run,
                                      timeout_s=args.nccl_timeout, min_busbw=args.nccl_min_busbw))
    return results
