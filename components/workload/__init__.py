"""The training workload: the namespace and its guard rails (namespace.py), Kueue and JobSet
(controllers.py), flavors and queues (queues.py), pod and quota sizing (sizing.py, pure), the
NCCL/libfabric env (fabric_env.py, pure), the training JobSets (training_job.py), the nightly
checkpoint cleanup (checkpoint_cleanup.py + checkpoint_cleanup_script.py) and what
scripts/verify reads from the outputs (verify_outputs.py, pure); the Args fields the
namespaced components share (namespaced.py).

May import: facts, config, common, network, identity, cluster, data, secrets.
"""
