"""A team stack's watch on its own jobs: the per-job alarms and the team's dashboard.

The metrics are the environment's (its platform stack's log metric filters, on the one application
log group every namespace logs to); the team stack only reads them, filtered to its namespace, and
alerts the platform's topic, as its budget does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.config.observability import ObservabilityConfig
from components.observability.dashboards import (
    DashboardScope,
    create_dashboard,
    dashboard_name_of,
    dashboard_url,
    team_panels,
)
from components.observability.training_metrics import WatchedJobs, create_job_alarms, metrics_namespace_of


@dataclass(frozen=True)
class TeamWatchArgs:
    watched: WatchedJobs
    """The team's jobs, in its namespace."""
    config: ObservabilityConfig
    """The platform's alarm settings (noStepMinutes, checkpointLateFactor)."""
    cluster_name: str
    """The platform's cluster: its metrics namespace and Container Insights' ClusterName."""
    region: str
    """Where the metrics are (every widget names the Region)."""
    name_prefix: str
    """Names the alarms and the dashboard."""
    topic_arn: pulumi.Input[str]
    """The platform's alert topic (its contract's alertTopicArn)."""
    title: str
    """The dashboard's heading."""


def team_watch(args: TeamWatchArgs, opts: pulumi.ResourceOptions) -> str:
    """Creates the alarms and the dashboard; returns the dashboard's console URL."""
    alarms = create_job_alarms("team-job", args.watched, config=args.config, cluster_name=args.cluster_name,
                               name_prefix=args.name_prefix, topic_arn=args.topic_arn, opts=opts)
    scope = DashboardScope(region=args.region, cluster_name=args.cluster_name,
                           metrics_namespace=metrics_namespace_of(args.cluster_name),
                           jobs_namespace=args.watched.namespace, team_only=True, jobs=tuple(args.watched.jobs),
                           alarm_arns=())
    name = dashboard_name_of(args.name_prefix)
    create_dashboard("team-dashboard", dashboard_name=name, scope=scope, alarm_arns=[a.arn for a in alarms],
                     panels=lambda s: team_panels(s, title=args.title), opts=opts)
    return dashboard_url(args.region, name)
