"""Entry point the engine runs for `pulumi preview --policy-pack policy/`.

Constructing the PolicyPack starts the analyzer's gRPC server and blocks, so this file holds
nothing else; the policies live in gpu_training_policy/ where tests import them.
"""

from gpu_training_policy import PACK_NAME, POLICIES
from pulumi_policy import PolicyPack

PolicyPack(
    name=PACK_NAME,
    policies=list(POLICIES),
    description="Guards every preview of gpu-training: network exposure, bucket and cluster hardening, node "
                "security, secrets, cost tags, team isolation, prod data, and advisory cost checks.",
)
