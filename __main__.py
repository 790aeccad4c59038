"""Entry point of `pulumi up`: validate the whole stack config, then build the stack."""

import pulumi

from components.config import TeamStackConfig, load_stack_config, read_raw_config, read_secret_keys
from components.platform import build_platform
from components.team import build_team

raw_config = read_raw_config()
config = load_stack_config(raw_config, project=pulumi.get_project(), stack=pulumi.get_stack(),
                           secret_keys=read_secret_keys(raw_config),
                           # Only the offline plan sets this (`scripts/plan.py --today`): the day EKS's
                           # support calendar is read for. `pulumi up` always uses the current date.
                           today=globals().get("PLAN_TODAY"))
for warning in config.warnings:
    pulumi.log.warn(warning)
outputs = build_team(config) if isinstance(config, TeamStackConfig) else build_platform(config)
for output_name, value in outputs.items():
    pulumi.export(output_name, value)
