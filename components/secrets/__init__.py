"""Secrets: AWS Secrets Manager under a customer key (store.py), synced into namespaces by
External Secrets and read by containers as env vars (sync.py).

May import: facts, config, common, network, identity, cluster, data.
"""
