"""Entry point of `pulumi up`: validate the whole stack config, then build the stack."""

import pulumi

from components.config import load_stack_config, read_raw_config
from components.platform import build_platform

config = load_stack_config(read_raw_config(), project=pulumi.get_project(), stack=pulumi.get_stack())
for output_name, value in build_platform(config).items():
    pulumi.export(output_name, value)
