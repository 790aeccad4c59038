"""The top-level `members` key of a team stack: the IAM roles of the team's people, who get
access to the team's namespace (and nothing else) on the platform's cluster.

    gpu-training:members:
      - arn:aws:iam::111122223333:role/vision-researchers

Each becomes an EKS access entry of the team stack (components/workload/team_members.py), with
rights in `team-<team>` only. Roles only: IAM best practice is short-term credentials through a
role, and a role that stands for the team (an IAM Identity Center permission set per team, say)
keeps one person's move between teams a change of who may assume it, not of this file.
"""

from __future__ import annotations

import re

from components.config.reader import Section
from components.facts.regions import ARN_PARTITION, arn_partition

KEY = "members"
# An IAM role, with or without a path: access entries take a role's path (EKS User Guide,
# "Create access entries": "If the ARN is for an IAM role, it can include a path"). IAM names
# are [\w+=,.@-] ASCII, a role name at most 64 characters (IAM User Guide, IAM quotas).
ROLE_ARN = re.compile(r"arn:(?P<partition>" + ARN_PARTITION + r"):iam::\d{12}:role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}",
                      re.ASCII)
# EKS takes one access entry per IAM principal and cluster ("An IAM principal can't be included
# in more than one access entry", same page): a member who is also a platform principal would
# make the team stack's CreateAccessEntry fail (ResourceInUseException) after other resources.


def parse_members(root: Section, *, region: str, platform_principals: dict[str, str]) -> tuple[str, ...]:
    """The team's member roles. `platform_principals`: ARN -> the platform key that lists it
    (cluster.adminPrincipals, cluster.readOnlyPrincipals); empty before the contract was read."""
    key = root.key(KEY)
    values = root.items(KEY)
    partition = arn_partition(region) if region else None
    for index, arn in enumerate(values):
        item = f"{key}[{index}]"
        match = ROLE_ARN.fullmatch(arn) if isinstance(arn, str) else None
        if match is None:
            root.error(item, arn, "is not an IAM role ARN",
                       "use arn:<partition>:iam::<account-id>:role/<name>, e.g. the role your team's people assume")
        elif partition and match["partition"] != partition:
            root.error(item, arn, f"is in the partition {match['partition']}, but the stack's region {region} is "
                       f"in {partition}", f"use the role's arn:{partition}:iam::... ARN")
        elif arn in platform_principals:
            root.error(item, arn, f"already has the platform's access entry ({platform_principals[arn]}), and EKS "
                       "takes one access entry per principal", "remove it here: that principal already reaches the "
                       "namespace through the platform's grant")
    if len(set(map(str, values))) != len(values):
        root.error(key, values, "lists a role twice", "list each role once")
    return tuple(str(v) for v in values)
