"""The Pulumi program, by domain. Config flows one way, and imports follow it downwards:

    facts -> config -> common -> network, identity -> cluster -> data -> secrets -> workload
          -> observability -> platform.py / team.py (the composition roots, which never import
                              each other: what both build is a component, e.g. workload/tenant.py)

A package may import only the packages to its left (tests/test_layering.py checks it):

- facts/          pure facts and arithmetic: instance types, EKS versions, CIDR plans, node sizing
- config/         stack YAML -> frozen, validated config; imports only facts/
- common/         small building blocks: IAM documents, tags, KMS keys, Helm releases, add-ons,
                  Pod Security namespaces
- network/        VPC, subnets, NAT, security groups (the GPU fabric), VPC endpoints
- identity/       IAM roles of the workloads (Pod Identity) and the policy documents of the data
- cluster/        EKS control plane, add-ons, GPU/CPU node pools, autoscaler, device plugins
- data/           S3 buckets, the checkpoint file system, the registry, volumes in the cluster
- secrets/        Secrets Manager and their sync into namespaces (External Secrets)
- workload/       the training tenant (namespace, queue, volumes, secrets, jobs: tenant.py), Kueue/JobSet,
                  queues, pod sizing, the training JobSets
- observability/  Container Insights, alarms and their topic
"""
