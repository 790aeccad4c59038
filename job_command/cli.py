"""`gpu-training job submit|status|logs|stop|list`: a team's ad-hoc jobs (docs/run-your-first-job.md).

submit: job file -> the team stack's config rules (jobfile.py), as deployed (the job context the
team stack wrote in its namespace) or as in the checkout (--job-context offline) -> the manifests of the one
rendering a stack job has (components/workload/training_job.py `job_objects`) -> the policy pack
(policy.py) -> the price (price.py) -> with --dry-run, the manifests on stdout and stop; otherwise
the team's namespace and LocalQueue, with the caller's own credentials (cluster.py). Nothing reaches
the cluster before every check passed: bad input exits 2, names the key, the value and the fix.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from kubernetes.client.exceptions import ApiException

from components.config import ConfigError
from components.config.job_context import JOB_CONTEXT_CONFIG_MAP, read_job_context
from components.workload.tenant import team_job_placement
from components.workload.training_job import job_objects
from job_command import operate
from job_command.cluster import api_message
from job_command.completion import bash_completion
from job_command.connect import ClusterUnreachableError, connect
from job_command.jobfile import TeamJob, load_team_job, read_job_file
from job_command.operate import EXIT_FAILED, EXIT_OK, PROG
from job_command.policy import PolicyUnavailableError, pack_verdict
from job_command.price import JobPrice, job_price, price_lines
from job_command.seams import Seams
from offline.cli_errors import USAGE_ERROR, ArgumentParser, fail
from offline.plan import manifest_yaml

STACK_VARIABLE = "GPU_TRAINING_STACK"

DESCRIPTION = """\
A team's ad-hoc training jobs, checked like a stack's: the job file holds the keys of one
training.jobs entry of the team stack; submit validates it against the stack and its platform
(pool, quota, image, secrets, grace on spot), renders the same JobSet a stack job gets, runs the
policy pack over it and prices it, then submits it to the team's LocalQueue as you (your kubeconfig)."""

LIVE, OFFLINE = "live", "offline"
JOB_CONTEXT_HELP = (f"what the job is judged against: {LIVE}, the team stack as deployed (the ConfigMap "
                    f"{JOB_CONTEXT_CONFIG_MAP} it wrote in its namespace, read with your kubeconfig); {OFFLINE}, this "
                    "checkout (the stack file and its platform's offline plan; needs no cluster). "
                    f"Default: {OFFLINE} with --dry-run, {LIVE} otherwise")

EPILOG = """\
examples:
  gpu-training job submit my-job.yaml --stack team-vision-prod --dry-run
  gpu-training job submit my-job.yaml --stack team-vision-prod --steps 20000 --steps-per-second 2.5
  gpu-training job status my-job --stack team-vision-prod --watch
  gpu-training job logs my-job --stack team-vision-prod --rank 0 --follow
  gpu-training job stop my-job --stack team-vision-prod
  gpu-training job list --stack team-vision-prod
  source <(gpu-training completion bash)

A submit judges the job against the team stack as deployed (--job-context live); a --dry-run
against this checkout, with no cluster (--job-context offline), unless told otherwise.
--stack defaults to $GPU_TRAINING_STACK. exit status: 0 done, 1 the job failed or is not there,
2 bad input or refused (nothing was created)."""


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    """An argparse type: a number above 0 (argparse turns the ValueError into exit 2 with the value)."""
    def parse(text: str) -> int | float:
        value = kind(text)
        if not value > 0:
            raise ValueError(text)
        return value
    parse.__name__ = f"positive {kind.__name__}"  # argparse's message: "invalid positive int value: '-5'"
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="gpu-training", description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="group", required=True, metavar="{job,completion}")
    job = commands.add_parser("job", help="submit, watch and stop a team's ad-hoc jobs", description=DESCRIPTION,
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = job.add_subparsers(dest="action", required=True, metavar="{submit,status,logs,stop,list}")
    submit = actions.add_parser("submit", help="check, price and submit a job file")
    submit.add_argument("job_file", type=Path, metavar="JOBFILE", help="YAML: the keys of one training.jobs entry")
    submit.add_argument("--dry-run", action="store_true", help="print the manifests and the checks, create nothing")
    submit.add_argument("--steps", type=_positive(int), metavar="N",
                        help="optimizer steps of the run, for the total price (default: the hyperparameters' steps)")
    submit.add_argument("--steps-per-second", type=_positive(float), metavar="R", help="the run's rate, for the total price")
    submit.add_argument("--job-context", choices=[LIVE, OFFLINE], help=JOB_CONTEXT_HELP)
    status = actions.add_parser("status", help="admission, progress, checkpoint, restarts and cost of a job")
    status.add_argument("name", metavar="NAME")
    status.add_argument("--watch", nargs="?", const=10.0, type=_positive(float), metavar="SECONDS",
                        help="refresh in place every SECONDS (default 10) until Ctrl-C")
    status.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    logs = actions.add_parser("logs", help="the trainer's log of one node's pod")
    logs.add_argument("name", metavar="NAME")
    logs.add_argument("--rank", type=int, default=0, metavar="N",
                      help="the pod of node N (0 .. nodes-1; default 0); global rank 0's step lines are on one of them")
    logs.add_argument("--follow", action="store_true", help="keep printing new lines")
    stop = actions.add_parser("stop", help="stop gracefully: the gang checkpoints and exits; submit again to resume")
    stop.add_argument("name", metavar="NAME")
    actions.add_parser("list", help="the jobs in the team's namespace")
    for action in (submit, status, logs, stop, actions.choices["list"]):
        action.add_argument("--stack", default=os.environ.get(STACK_VARIABLE), metavar="team-<team>-<env>",
                            help=f"the team stack (default ${STACK_VARIABLE})")
        action.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default $KUBECONFIG or ~/.kube/config)")
        action.add_argument("--context", help="its context (default: the current one)")
    completion = commands.add_parser("completion", help="print a shell completion script")
    completion.add_argument("shell", choices=["bash"])
    return parser


def main(argv: list[str] | None = None, seams: Seams | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.group == "completion":
        print(bash_completion(build_parser()))
        return EXIT_OK
    if not args.stack:
        return fail(PROG, f"--stack is required (or set ${STACK_VARIABLE}), e.g. --stack team-vision-prod")
    seams = seams or default_seams()
    try:
        if args.action == "submit":
            return submit(args, seams)
        return operate.run(args, seams)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return USAGE_ERROR
    except (ClusterUnreachableError, PolicyUnavailableError) as error:
        return fail(PROG, str(error))
    except ApiException as error:
        # e.g. 403: the caller's identity lacks a right in the team's namespace (docs/run-your-first-job.md).
        fail(PROG, f"the cluster answered HTTP {error.status} {error.reason}: {api_message(error)}")
        return EXIT_FAILED
    except TimeoutError as error:
        fail(PROG, str(error))
        return EXIT_FAILED


def default_seams() -> Seams:
    return Seams(connect=connect, policy=pack_verdict)


def submit(args: argparse.Namespace, seams: Seams) -> int:
    namespace = operate.namespace_of(args.stack)  # a platform stack is refused before any connection
    live = (args.job_context or (OFFLINE if args.dry_run else LIVE)) == LIVE
    if live:
        read_job_file(args.job_file)  # a file that is not one job fails before any connection
    cluster = seams.connect(args) if live else None
    context = read_job_context(cluster.job_context(namespace), stack=args.stack, namespace=namespace) if cluster else None
    team_job = load_team_job(args.stack, args.job_file, context=context)
    job = team_job.job
    placement = team_job_placement(team_job.team, job)
    objects = job_objects(job, placement)
    verdict = seams.policy(args.stack, read_job_file(args.job_file))
    if verdict.refused:
        print(verdict.report, file=sys.stderr)
        return fail(PROG, f"the policy pack refuses job {job.name} (mandatory violations above); nothing was created")
    price = job_price(job, placement.pool, team_job.team.region, steps=args.steps or _stated_steps(team_job),
                      steps_per_second=args.steps_per_second)
    judged_against = (f"the deployed team stack (ConfigMap {JOB_CONTEXT_CONFIG_MAP} of namespace {namespace})" if live
                      else "this checkout (the stack file and its platform's offline plan)")
    _summary(team_job, price, verdict.report, placement.pool.gpus_per_node, judged_against)
    if args.dry_run:
        print("---\n".join(manifest_yaml(manifest) for manifest in objects.manifests()), end="")
        return EXIT_OK
    return operate.submit_objects(args, cluster or seams.connect(args), objects)


def _stated_steps(team_job: TeamJob) -> int | None:
    """The hyperparameters' `steps` (the example trainer's key), where the file states it."""
    try:
        value = yaml.safe_load(team_job.job.hyperparameters).get("steps")
    except (yaml.YAMLError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _summary(team_job: TeamJob, price: JobPrice, policy_report: str, pool_gpus: int, judged_against: str) -> None:
    job, team = team_job.job, team_job.team
    lines = [f"job {job.name}: valid for stack {team.stack} (namespace {team.training_namespace}, "
             f"{job.nodes} x {job.gpus_per_node} GPUs on pool {job.pool})",
             f"judged against: {judged_against}",
             f"policy pack: {policy_report}",
             *price_lines(job, price, pool_gpus),
             f"checkpoints: /workspace/checkpoints/{team.stack}/{job.name} (submitting this name again resumes there)"]
    print("\n".join(lines), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
