"""Each registered team's checkpoints access point and PersistentVolumes, made by the platform stack
from its registry of teams (`teams`, components/config/teams.py) on its own file system and cluster
(a MultiKueue worker's platform stack makes the same for the manager's teams on the worker):

    EFS access point `/workloads/team-<team>` (the trainer's POSIX user, created 0750 for it)
    -> PersistentVolume `checkpoints-team-<team>` on `<file system id>::<access point id>`
    PersistentVolume `datasets-team-<team>` on the datasets bucket (Mountpoint for Amazon S3)
    each reserved (claimRef) for its one claim, `checkpoints` or `datasets`, in `team-<team>`

Why the platform: a team's deploy role may make neither. The access point's root directory is what
keeps a team in its own directory, and `elasticfilesystem:CreateAccessPoint` takes no condition key
that names it (Service Authorization Reference, Amazon EFS: `aws:RequestTag`, `aws:TagKeys` only),
so an IAM policy could not hold the role to `/workloads/team-<team>`; and PersistentVolumes are
cluster-scoped, outside the namespace its access entry is scoped to (team_deploy_access.py). The
team stack makes the claims (namespaced), which bind to these volumes by their claimRef.

Each volume has the name, labels and spec the team stack gave it before (data/mounts.py makes
both), so its claims bind as before; `tests/test_team_volumes.py` holds them equal to the team
plan recorded before the move. The team access points are not among the platform's own
(data/file_system.py `access_points`, which its EFS CSI role may describe): the platform's roles
reach no team directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.config.teams import TeamQueueConfig
from components.data.file_system import access_point
from components.data.mounts import VolumeSources, efs_checkpoints, persistent_volume, s3_datasets


@dataclass(frozen=True)
class TeamVolumesArgs:
    file_system_id: pulumi.Input[str]
    """The platform's EFS file system (the checkpoints of every namespace, each in its own directory)."""
    datasets_bucket: pulumi.Input[str]
    """The platform's datasets bucket (on a worker: its replica), mounted read-only."""
    region: str
    """The platform's region, given to Mountpoint (its pods cannot look it up: IMDS hop limit 1)."""
    name_prefix: str
    """Names the access points (their `Name` tag)."""
    volumes_depend_on: Sequence[pulumi.Resource] = ()
    """What the volumes wait for (the platform's CSI drivers and `efs-static` storage class)."""


def team_access_point_resource_name(team: str) -> str:
    """The Pulumi name of team `team`'s access point in the platform stack (part of its URN)."""
    return f"team-{team}-checkpoints-ap"


def team_volumes(rows: Sequence[TeamQueueConfig], args: TeamVolumesArgs,
                 opts: pulumi.ResourceOptions) -> dict[str, aws.efs.AccessPoint]:
    """Team name -> its access point, with its two volumes. `opts`: the AWS and Kubernetes providers."""
    made = {}
    for row in rows:
        made[row.name] = access_point(team_access_point_resource_name(row.name), file_system_id=args.file_system_id,
                                      workload=row.namespace, name_prefix=args.name_prefix, opts=opts)
        sources = VolumeSources(file_system_id=args.file_system_id, checkpoint_access_point_id=made[row.name].id,
                                datasets_bucket=args.datasets_bucket)
        after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(args.volumes_depend_on)))
        persistent_volume(f"team-{row.name}-checkpoints-volume", efs_checkpoints(sources),
                          namespace=row.namespace, opts=after)
        persistent_volume(f"team-{row.name}-datasets-volume",
                          s3_datasets(sources, namespace=row.namespace, region=args.region),
                          namespace=row.namespace, opts=after)
    return made


def access_point_outputs(made: dict[str, aws.efs.AccessPoint]) -> dict[str, dict[str, pulumi.Output[str]]]:
    """What the platform publishes of each team's access point (config/platform_contract.py TEAM_ACCESS_POINTS)."""
    return {team: {"id": point.id, "arn": point.arn} for team, point in sorted(made.items())}
