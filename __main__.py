"""Entry point of `pulumi up`: validate the whole stack config, then build the stack."""

import pulumi

from components.config import TeamStackConfig, decode_raw_config, load_stack_config, read_secret_keys
from components.config.bootstrap_registry import refuse_members_not_in_bootstrap, refuse_teams_without_roles
from components.config.placeholders import deploys_for_real, find_placeholders, refuse_or_warn
from components.config.platform_contract import published_config
from components.config.stack import StackConfig, read_engine_config
from components.config.stack_names import stack_kind
from components.platform import build_platform
from components.team import TeamEngineConfig, build_team

engine_config = read_engine_config()
raw_config = decode_raw_config(engine_config)
secret_keys = read_secret_keys(raw_config)
# Only the offline plan sets this (`scripts/plan.py --today`): the day EKS's support calendar is
# read for. `pulumi up` always uses the current date.
today = globals().get("PLAN_TODAY")


def load(platform: StackConfig | None = None) -> StackConfig | TeamStackConfig:
    return load_stack_config(raw_config, project=pulumi.get_project(), stack=pulumi.get_stack(),
                             secret_keys=secret_keys, today=today, platform=platform)


config = load()
for warning in config.warnings:
    pulumi.log.warn(warning)
if isinstance(config, StackConfig):
    # Each team of its registry has a deploy role in the bootstrap's (components/config/bootstrap_registry.py).
    for warning in refuse_teams_without_roles(config.teams, project=config.project,
                                              environment=stack_kind(config.stack)[1] or config.environment):
        pulumi.log.warn(warning)
else:
    # Each member is one the team's deploy role may give an access entry (the bootstrap's registry).
    for warning in refuse_members_not_in_bootstrap(config.members, project=config.project, team=config.team):
        pulumi.log.warn(warning)
# A real `pulumi up`/`preview` refuses the stack files' example values (a dev stack may allow them,
# with a warning); the offline plan, under mocks, lists them itself (offline/plan.py).
if deploys_for_real() and (placeholder_warning := refuse_or_warn(
        find_placeholders(raw_config, project=config.project, secret_keys=secret_keys),
        stack=config.stack, allowed=config.allow_placeholders)):
    pulumi.log.warn(placeholder_warning)
if isinstance(config, TeamStackConfig):
    # A team stack is judged again once its platform's contract is read (components/team.py).
    outputs = build_team(config, bind=load, engine=TeamEngineConfig(engine_config, secret_keys), today=today)
else:
    outputs = build_platform(config, published_config(engine_config, secret_keys, project=config.project))
for output_name, value in outputs.items():
    pulumi.export(output_name, value)
