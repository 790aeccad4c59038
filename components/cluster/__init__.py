"""The EKS cluster and its nodes: control plane and boot add-ons (control_plane.py), add-ons
that need nodes (addons.py), GPU and CPU node pools (node_pools.py) with their user data
(node_bootstrap.py, pure), labels, taints and scale-from-zero tags (pool_scheduling.py, pure),
the Cluster Autoscaler (autoscaler.py) with the ProvisioningRequest API for gangs
(provisioning_requests.py), and the NVIDIA and EFA device plugins (device_plugins.py).

May import: facts, config, common, network, identity.
"""
