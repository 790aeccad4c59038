"""Watching the platform: Container Insights with GPU metrics and logs, the training alarms
(idle GPUs, full GPU memory, failed nodes) and their encrypted topic (monitoring.py), the stack's monthly AWS Budget (budget.py).

May import: facts, config, common, network, identity, cluster, data, secrets, workload.
"""
