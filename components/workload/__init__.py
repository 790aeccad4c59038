"""The training workload: the namespace and its guard rails (namespace.py), Kueue and JobSet
(controllers.py), flavors and queues (queues.py), pod and quota sizing (sizing.py, pure) and
the training JobSets (training_job.py).

May import: facts, config, common, network, identity, cluster, data, secrets.
"""
