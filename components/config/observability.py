"""The `observability` section: who is alerted, and the go-live alert thresholds.

Alarms (components/observability/monitoring.py): GPU utilisation below `gpuIdlePercent` on some node for
`gpuIdleMinutes` (usually a data-loading bottleneck, or a gang waiting with paid GPUs), GPU memory
above `gpuMemoryPercent`, and any node in a failed condition. Per training job
(components/observability/training_metrics.py): a NaN/inf loss, no step for `noStepMinutes` while
its namespace runs pods, no checkpoint for `checkpointLateFactor` x its planned interval. They notify an SNS topic that
e-mails `alertEmails` and texts `alertSms`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.config.keys import integer_default_of, minimum_of
from components.config.network import LOG_RETENTION_DAYS
from components.config.reader import Section

# The common form of an address (no quoted local parts or raw Unicode domains): SNS e-mails it as is.
EMAIL = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,63}")
E164 = re.compile(r"\+[1-9][0-9]{7,14}")
# Node logs (the host group carries authpriv, i.e. /var/log/secure: logins, sudo, SSM sessions)
# are audit evidence: prod keeps them a year at least.
PROD_MIN_NODE_LOG_RETENTION_DAYS = 365
# The performance group holds the raw metric records (one per pod, container and node per
# minute: the largest group). CloudWatch keeps the metrics extracted from them for 15 months, so
# the raw records only serve recent queries; a month covers an incident review.
PERFORMANCE_LOG_RETENTION_DAYS = 30
# The trainer's startup budget: noStepMinutes' default and least value (its row says why).
TRAINER_STARTUP_MINUTES = minimum_of("observability.noStepMinutes")
DEFAULT_CHECKPOINT_LATE_FACTOR = integer_default_of("observability.checkpointLateFactor")


@dataclass(frozen=True)
class ObservabilityConfig:
    alert_emails: tuple[str, ...]
    alert_sms: tuple[str, ...]
    gpu_idle_percent: int
    gpu_idle_minutes: int
    gpu_memory_percent: int
    log_retention_days: int
    node_log_retention_days: int = PROD_MIN_NODE_LOG_RETENTION_DAYS
    no_step_minutes: int = TRAINER_STARTUP_MINUTES
    """A job's namespace runs pods but the job logged no step for this long: stalled or restarting."""
    checkpoint_late_factor: int = DEFAULT_CHECKPOINT_LATE_FACTOR
    """A stepping job without a checkpoint for this many planned intervals alarms."""

    @property
    def log_group_retention_days(self) -> dict[str, int]:
        """Retention of each Container Insights log group (/aws/containerinsights/<cluster>/<kind>)."""
        return {
            # Containers' stdout/stderr: the training logs; how long is the stack's choice.
            "application": self.log_retention_days,
            # kubelet, containerd, kube-proxy: what a node did with pods, read with the host logs.
            "dataplane": self.node_log_retention_days,
            # Kernel (dmesg: GPU XID errors), messages and authpriv (/var/log/secure).
            "host": self.node_log_retention_days,
            "performance": min(self.log_retention_days, PERFORMANCE_LOG_RETENTION_DAYS),
        }


def parse_observability(section: Section, *, environment: str) -> ObservabilityConfig:
    emails = _addresses(section, "alertEmails", EMAIL, "an e-mail address", "write it like ml-oncall@example.com")
    sms = _addresses(section, "alertSms", E164, "an E.164 phone number", "write it like +14155550100")
    if environment == "prod" and not emails and not sms:
        section.error(section.key("alertEmails"), [], "prod alarms must reach someone",
                      "list the on-call e-mail addresses (or alertSms numbers)")
    idle_percent = section.integer("gpuIdlePercent")
    idle_minutes = section.integer("gpuIdleMinutes")
    if idle_minutes % 5:
        section.error(section.key("gpuIdleMinutes"), idle_minutes, "alarms evaluate 5-minute periods",
                      "use a multiple of 5")
    memory_percent = section.integer("gpuMemoryPercent")
    retention = section.integer("logRetentionDays")
    if retention not in LOG_RETENTION_DAYS:
        section.error(section.key("logRetentionDays"), retention, "is not a CloudWatch Logs retention period",
                      "use e.g. 30, 90, 365")
    node_retention = section.integer("nodeLogRetentionDays", PROD_MIN_NODE_LOG_RETENTION_DAYS if environment == "prod" else 90)
    if node_retention not in LOG_RETENTION_DAYS:
        section.error(section.key("nodeLogRetentionDays"), node_retention, "is not a CloudWatch Logs retention period",
                      "use e.g. 90, 365, 731")
    elif environment == "prod" and node_retention < PROD_MIN_NODE_LOG_RETENTION_DAYS:
        section.error(section.key("nodeLogRetentionDays"), node_retention,
                      f"node logs (logins, sudo, kernel) are audit evidence: prod keeps them at least "
                      f"{PROD_MIN_NODE_LOG_RETENTION_DAYS} days",
                      f"set nodeLogRetentionDays: {PROD_MIN_NODE_LOG_RETENTION_DAYS} or more")
    no_step, late_factor = _training_alarm_settings(section)
    section.finish()
    return ObservabilityConfig(emails, sms, idle_percent, idle_minutes, memory_percent, retention, node_retention,
                               no_step, late_factor)


def _training_alarm_settings(section: Section) -> tuple[int, int]:
    no_step = section.integer("noStepMinutes")
    if no_step % 5:
        section.error(section.key("noStepMinutes"), no_step, "alarms evaluate 5-minute periods", "use a multiple of 5")
    late_factor = section.integer("checkpointLateFactor")
    return no_step, late_factor


def _addresses(section: Section, name: str, pattern: re.Pattern, what: str, fix: str) -> tuple[str, ...]:
    values = section.items(name)
    for index, value in enumerate(values):
        if not isinstance(value, str) or not pattern.fullmatch(value):
            section.error(f"{section.key(name)}[{index}]", value, f"is not {what}", fix)
    if len({str(v).lower() for v in values}) != len(values):
        section.error(section.key(name), values, "lists a recipient twice", "list each recipient once")
    return tuple(str(v) for v in values)
