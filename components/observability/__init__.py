"""Watching the platform: Container Insights with GPU metrics and logs, the seed's alarms and
their encrypted topic (monitoring.py).

May import: facts, config, common, network, identity, cluster, data, secrets, workload.
"""
