"""The network of an environment: VPC, subnets, NAT, flow logs (vpc.py), the security groups,
including the GPU fabric groups that open exactly what NCCL needs (security_groups.py), and the
VPC endpoints (endpoints.py); the CI runner's way to the EKS API (ci_runner.py); the VPC peering of
a MultiKueue manager and its workers (peering.py).

May import: facts, config, common.
"""
