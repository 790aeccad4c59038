"""Metrics the add-ons publish to CloudWatch, which the dashboards and alarms may read.

Every dashboard widget names either a metric the plan's own log metric filters create
(components/observability/training_metrics.py, monitoring.py) or one of these; a test walks every
planned widget against both (tests/test_dashboards.py).

Source: the CloudWatch Observability EKS add-on (Container Insights with enhanced observability),
namespace `ContainerInsights`: "Amazon EKS and Kubernetes Container Insights with enhanced
observability metrics",
docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-metrics-enhanced-EKS.html
(the dimension sets per metric are that page's). GPU metrics come from the add-on's dcgm-exporter
("NVIDIA GPU metrics", add-on v1.3.0-eksbuild.1 or later); EFA metrics from add-on v1.5.2
("AWS Elastic Fabric Adapter (EFA) metrics", where the EFA device plugin runs).

Not here, so on no dashboard:
- Kueue's Prometheus metrics (kueue_pending_workloads, kueue_admitted_active_workloads per
  ClusterQueue): Kueue serves them on its metrics port, but nothing in the plan ships them to
  CloudWatch (the add-on scrapes no Prometheus targets unless configured to). `kubectl get
  clusterqueues` / `kubectl -n <ns> get workloads` answer "pending and admitted per queue".
- Node auto-repair events: EKS node monitoring agent conditions reach Container Insights only as
  cluster_failed_node_count (a node in a failed condition, which repair then replaces); the
  repairs themselves are EKS events, not metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTAINER_INSIGHTS = "ContainerInsights"

CLUSTER = ("ClusterName",)
NODE = ("ClusterName", "InstanceId", "NodeName")
GPU_DEVICE = ("ClusterName", "InstanceId", "InstanceType", "NodeName", "GpuDevice")
NAMESPACE = ("ClusterName", "Namespace")
EFA_DEVICE = ("ClusterName", "InstanceId", "InstanceType", "NodeName", "NetworkInterfaceId")


@dataclass(frozen=True)
class PublishedMetric:
    namespace: str
    name: str
    dimension_sets: tuple[tuple[str, ...], ...]
    description: str


def _ci(name: str, description: str, *dimension_sets: tuple[str, ...]) -> PublishedMetric:
    return PublishedMetric(CONTAINER_INSIGHTS, name, dimension_sets, description)


PUBLISHED_METRICS = (
    _ci("cluster_node_count", "worker nodes in the cluster", CLUSTER),
    _ci("cluster_failed_node_count", "worker nodes in a failed condition", CLUSTER),
    _ci("namespace_number_of_running_pods", "running pods per namespace", NAMESPACE, CLUSTER),
    _ci("node_gpu_limit", "GPUs on the node", CLUSTER, NODE),
    _ci("node_gpu_usage_total", "GPUs used by the node's running pods", CLUSTER, NODE),
    _ci("node_gpu_utilization", "percent utilisation of the node's GPUs", CLUSTER, NODE, GPU_DEVICE),
    _ci("node_gpu_memory_utilization", "percent of the node's GPU frame buffer used", CLUSTER, NODE, GPU_DEVICE),
    _ci("pod_gpu_utilization", "percent utilisation of the pod's GPUs", CLUSTER,
        ("ClusterName", "Namespace", "PodName", "ContainerName")),
    _ci("pod_gpu_memory_utilization", "percent of the pod's GPU frame buffer used", CLUSTER, NAMESPACE),
    _ci("node_efa_rx_bytes", "bytes/s received by the node's EFA devices", CLUSTER, NODE, EFA_DEVICE),
    _ci("node_efa_tx_bytes", "bytes/s transmitted by the node's EFA devices", CLUSTER, NODE, EFA_DEVICE),
    _ci("node_efa_rx_dropped", "packets/s received and dropped by the node's EFA devices", CLUSTER, NODE, EFA_DEVICE),
    _ci("node_efa_rdma_read_bytes", "bytes/s received by RDMA reads", CLUSTER, NODE, EFA_DEVICE),
    _ci("node_efa_rdma_write_bytes", "bytes/s sent by RDMA writes", CLUSTER, NODE, EFA_DEVICE),
)
BY_NAME = {(metric.namespace, metric.name): metric for metric in PUBLISHED_METRICS}
