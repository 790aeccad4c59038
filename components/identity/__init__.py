"""Who may do what: the workloads' IAM roles bound with EKS Pod Identity (workload_roles.py) and
the pure policy documents of buckets, keys, file systems and roles (policies.py).

May import: facts, config, common.
"""
