"""The NCCL and libfabric environment of a training pod, from one place (pure, table-tested).

Keyed on the pool's instance facts and fabric. Only variables a reference justifies are set;
what the aws-ofi-nccl plugin already tunes per platform (NCCL_BUFFSIZE, NCCL_P2P_NET_CHUNKSIZE,
NCCL_NVLS*/NVLSTREE chunk sizes, NCCL_TUNER_PLUGIN, FI_EFA_FORK_SAFE: aws/aws-ofi-nccl@2daf7d30
src/platform-aws.cpp, set only when the user has not) is left to it, and what its EFA
cheatsheet calls obsolete (NCCL_PROTO=simple, NCCL_MIN_CHANNELS, socket thread counts:
doc/efa-env-var.md) is not set at all.
"""

from __future__ import annotations

from components.facts.instance_types import InstanceType

# NCCL's bootstrap and (on socket pools) its data path use TCP over these interfaces.
SOCKET_INTERFACES = "^lo,docker"


def fabric_env(instance: InstanceType, *, efa: bool) -> dict[str, str]:
    """Environment of a pod on a node of `instance`; `efa` when the pool attaches EFA devices.

    A pool's types share one EFA count (the config model checks it) and, here, the GPUDirect
    RDMA fact of its first type: the launcher holds every node to both."""
    env = {"NCCL_SOCKET_IFNAME": SOCKET_INTERFACES}
    if not efa:
        # Socket pools: NCCL's own TCP transport, on the ports the pod's ip_local_port_range pins
        # (the fabric security group opens exactly that range). Naming it keeps the EFA plugin,
        # which the image carries for EFA pools, from being tried at all.
        return {**env, "NCCL_NET": "Socket", "TRAIN_FABRIC": "socket"}
    env |= {
        # The launcher's self-check: fail the job if NCCL did not pick Libfabric (trainer/launcher/fabric.py).
        "TRAIN_FABRIC": "efa",
        # What the self-check expects NCCL to find on every node: all of the type's EFA devices
        # (the pod requests them all, workload/sizing.py) and, where the type has it, GPUDirect RDMA
        # (EC2 DescribeInstanceTypes MaximumEfaInterfaces; aws-ofi-nccl src/platform-aws.cpp gdr_required).
        "TRAIN_EFA_DEVICES": str(instance.efa_interfaces),
        "TRAIN_EFA_GPUDIRECT_RDMA": "1" if instance.efa_gpudirect_rdma else "0",
        # Fail loudly instead of falling back to sockets: with NCCL_NET set, NCCL initialises only
        # that network and reports "Failed to initialize any NET plugin" (NCCL 2.29.3 src/plugin/net.cc).
        "NCCL_NET": "Libfabric",
        # Load aws-ofi-nccl by name: libnccl-net-ofi.so, which both its packages install
        # (NCCL 2.29.3 src/plugin/plugin_open.cc; aws-ofi-nccl contrib/debian-template/rules).
        "NCCL_NET_PLUGIN": "ofi",
        # Harmless with aws-ofi-nccl >= 1.7 (it filters the efa provider itself); AWS's EKS NCCL
        # test manifests still set it (awsome-distributed-training nccl-tests.yaml).
        "FI_PROVIDER": "efa",
        # DataLoader workers fork(); with libfabric's huge-page buffers that fails with
        # "OSError: Cannot allocate memory" (aws-ofi-nccl doc/efa-env-var.md, FI_EFA_USE_HUGE_PAGE).
        # So the pods request no hugepages-2Mi either (nothing would use them).
        "FI_EFA_USE_HUGE_PAGE": "0",
    }
    if instance.efa_gpudirect_rdma:
        # GPUDirect RDMA. libfabric >= 1.18 enables it by itself where the device supports it, and
        # aws-ofi-nccl refuses to run without it on these types (gdr_required); the cheatsheet
        # calls setting it "not harmful" on p4/p5. Only on types whose facts say RDMA: elsewhere
        # there is no device RDMA to ask for.
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env
