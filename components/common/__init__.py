"""Small building blocks every domain uses: IAM policy documents, cost tags, customer KMS keys,
pinned Helm releases and EKS add-ons, Pod Security namespaces that start from deny-all, the
permissions boundary on every role (boundary.py), custom resources from manifests (manifests.py),
a type token renamed with an alias (renames.py), the provider's ARN partition (partition.py),
EKS access entries with their one access policy (access_entries.py).

May import: facts, config.
"""
