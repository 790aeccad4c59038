"""Where training data and results live: S3 buckets (buckets.py) and their access logs
(access_logs.py, bucket_controls.py), the shared checkpoint file system (file_system.py, EFS),
FSx for Lustre for large jobs (lustre.py), the trainer image registry (registry.py), the volumes
a training namespace mounts (mounts.py) and the pod's data contract (training_data.py, pure).

May import: facts, config, common, network, identity, cluster.
"""
