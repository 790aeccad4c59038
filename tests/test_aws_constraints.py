"""Values the plans send to AWS that AWS's own API constraints refuse, although the provider's schema takes them."""

import re

import pytest
from stack_configs import PLATFORM_STACKS

# EC2's allowed characters in a security group's and a rule's description (EC2 API reference,
# CreateSecurityGroup GroupDescription and UserIdGroupPair/IpRange Description: "a-z, A-Z, 0-9,
# spaces, and ._-:/()#,@[]+=;{}!$*", up to 255; the group's own also allows &). The provider's
# schema has no pattern: a description with an apostrophe plans, and the first `pulumi up` fails
# with InvalidParameterValue.
SG_DESCRIPTION = re.compile(r"[a-zA-Z0-9 ._\-:/()#,@\[\]+=;{}!$*]{0,255}")
SG_TYPES = ("aws:ec2/securityGroup:SecurityGroup", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_every_security_group_description_uses_only_what_ec2_accepts(stack, plan_of):
    descriptions = [(r["name"], r["inputs"]["description"]) for t in SG_TYPES for r in plan_of(stack).of_type(t)
                    if "description" in r["inputs"]]
    assert len(descriptions) > 5
    assert [(name, text) for name, text in descriptions if not SG_DESCRIPTION.fullmatch(text)] == []


def test_the_description_pattern_refuses_what_ec2_refuses():
    assert not SG_DESCRIPTION.fullmatch("Lustre LNET between the file system's servers")
    assert not SG_DESCRIPTION.fullmatch("x" * 256)
    assert SG_DESCRIPTION.fullmatch("NCCL/gloo ports (50000-51999) from sg-0abc: self")
