"""The CI runners' machines, as EC2 lists them: the instances in the stack's runner security group
(output `ciRunnerSecurityGroupId`, docs/delivery.md "CI runners") carry the `environment` and
`project` tags, which put them inside the tag scopes of the deploy roles and the permissions
boundaries (an untagged instance is outside every "only this environment's" condition), and look
ephemeral: one job per machine.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from verify.report import CheckResult, Diagnosis, failed, passed, skipped, warned
from verify.stack_outputs import StackOutputs

CHECK = "ci.runner-tags"
# Every state in which an instance still exists and can be reached (EC2 API reference,
# InstanceState): a stopped runner keeps its tags and can be started again.
LIVE_STATES = ("pending", "running", "stopping", "stopped")
# An ephemeral runner serves one job; the longest job on these runners is deploy.yml's `up`,
# timeout-minutes 120. A machine up for a day has served more than one job, or idles in a pool.
EPHEMERAL_HOURS = 24


def runner_instances(ec2: Any, group_id: str) -> list[dict[str, Any]]:
    pages = ec2.get_paginator("describe_instances").paginate(Filters=[
        {"Name": "instance.group-id", "Values": [group_id]},
        {"Name": "instance-state-name", "Values": list(LIVE_STATES)}])
    return [instance for page in pages for reservation in page["Reservations"] for instance in reservation["Instances"]]


def tag_problems(instance: dict[str, Any], wanted: dict[str, str]) -> list[str]:
    tags = {tag["Key"]: tag["Value"] for tag in instance.get("Tags") or []}
    return [f"{key}={tags[key]!r} (wants {value!r})" if key in tags else f"no {key} tag (wants {value!r})"
            for key, value in wanted.items() if tags.get(key) != value]


def check_runner_tags(outputs: StackOutputs, project: str, ec2: Callable[[], Any], now: float) -> CheckResult:
    group, environment = outputs.ci_runner_security_group, outputs.environment
    if group is None or environment is None:
        return skipped(CHECK, "the stack exports no CI runner security group (a team stack has no runners)")
    try:
        instances = runner_instances(ec2(), group)
    except Exception as e:  # botocore: no credentials, access denied, endpoint unreachable
        return failed(CHECK, "cannot list the CI runners' instances", Diagnosis(
            f"no EC2 read access from here ({type(e).__name__}: {' '.join(str(e).split())[:160]})",
            "aws sts get-caller-identity"))
    if not instances:
        return skipped(CHECK, f"no instance in the runners' security group {group} (runners started per job, "
                       "none running now; or runners that are pods of another cluster)")
    wanted = {"environment": environment, "project": project}
    wrong = {i["InstanceId"]: problems for i in instances if (problems := tag_problems(i, wanted))}
    if wrong:
        ids = " ".join(sorted(wrong))
        return failed(CHECK, f"{len(wrong)} of {len(instances)} runner instances lack their environment/project tags",
                      Diagnosis("an untagged runner is outside the tag conditions that keep other environments' "
                                "roles off it (ssm:SendCommand, ssm:StartSession): tag it where it is launched "
                                "(the launch template or the runner module's tags)",
                                f"aws ec2 create-tags --region {outputs.region} --resources {ids} --tags "
                                f"Key=environment,Value={environment} Key=project,Value={project}"),
                      *[f"{instance}: {', '.join(problems)}" for instance, problems in sorted(wrong.items())])
    long_lived = sorted(i["InstanceId"] for i in instances if _hours_up(i, now) > EPHEMERAL_HOURS)
    if long_lived:
        return warned(CHECK, f"{len(instances)} runner instances tagged; {len(long_lived)} up for more than "
                      f"{EPHEMERAL_HOURS} h: an ephemeral runner's machine serves one job (docs/delivery.md, "
                      "CI runners); a persistent runner keeps one job's files for the next", *long_lived)
    return passed(CHECK, f"{len(instances)} runner instances tagged environment={environment}, project={project}",
                  instances=len(instances))


def _hours_up(instance: dict[str, Any], now: float) -> float:
    launched = instance.get("LaunchTime")
    return (now - launched.timestamp()) / 3600 if isinstance(launched, datetime) else 0.0
