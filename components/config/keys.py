"""Every config key of the gpu-training project, once: its type, default, bounds, allowed values,
meaning and the kinds of stack that may set it. The parsers' getters (reader.Section) read a key's
default, bounds and allowed values from its row; a parser passes none of them again.

Pulumi.yaml's `config:` descriptions and the key table of docs/configuration-errors.md are
rendered from this table (scripts/config_docs.py), and tests/test_config_keys.py holds it to what
the parsers read. A key the parsers read and this table lacks, or the reverse, fails that test.

Paths are spelled as the messages spell them after `gpu-training:`: `network.vpcCidr`,
`nodePools[].size.max` (`[]`: any item of a list). Entries of a `map` (secret names, pool names,
env names, labels) are named by the user, so the map is listed and its entries are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLATFORM, TEAM = "platform", "team"
BOTH = frozenset({PLATFORM, TEAM})

STRING, INTEGER, BOOLEAN, LIST, MAPPING, MAP = "string", "integer", "boolean", "list", "mapping", "map"
"""`mapping`: the keys below it in this table; `map`: names chosen by the user, each with a value."""


class _Marker:
    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


REQUIRED = _Marker("required")
UNSET = _Marker("unset")
"""Optional with no value at all: the feature it turns on stays off (no Lustre, no CPU limit)."""


@dataclass(frozen=True)
class Derived:
    """A default that depends on other values (the environment, the pool's kind): said in words."""

    text: str


@dataclass(frozen=True)
class Key:
    path: str
    type: str
    doc: str
    default: object = REQUIRED
    """REQUIRED, UNSET, Derived(...) or the literal value the parser uses when the key is left out."""
    allowed: tuple[str, ...] = ()
    """The closed set of values a string key accepts; empty when open (a pattern or a range)."""
    stacks: frozenset[str] | None = None
    """Top-level keys only: the kinds of stack that may set it. A nested key goes with its top-level key."""
    entries: str = STRING
    """A list's or a map's only: the type of each item or entry (a list of mappings has its keys in the table)."""
    minimum: int | None = None
    """An integer's least value (a list's or a map's: each item's or entry's); None: only the 32-bit range."""
    maximum: int | None = None
    """An integer's greatest value, as `minimum`."""

    @property
    def top(self) -> str:
        return self.path.split(".")[0].split("[")[0]


KEYS: tuple[Key, ...] = (
    Key("environment", STRING, "The stack's environment; must equal the stack name (or its suffix for team stacks).",
        allowed=("dev", "staging", "prod"), stacks=BOTH),
    Key("region", STRING, "AWS region every resource of the stack lives in, e.g. us-east-1 (components/facts/regions.py); "
        "no two platform stacks of an environment share one.",
        stacks=BOTH),
    Key("costCenter", STRING, "Billing tag applied to every AWS resource (tag `cost-center`).", stacks=BOTH),
    Key("iamPermissionsBoundary", STRING,
        "ARN of the managed policy every IAM role of the stack carries as permissions boundary: the bootstrap's "
        "`permissionsBoundaryArns.<env>`, without which its CI deploy roles create no role (docs/delivery.md). "
        "A team stack takes its platform stack's, or its team boundary beside it (`<project>-boundary-<env>-team-<team>`, "
        "the one its team deploy role creates roles with); never another team's.",
        default=UNSET, stacks=BOTH),

    Key("network", MAPPING, "VPC layout of the environment.", stacks=frozenset({PLATFORM})),
    Key("network.vpcCidr", STRING, "The VPC's private /16 to /20; may not overlap the vpcCidr of another environment's "
        "stack file in stacks/ (distinct ranges can be peered)."),
    Key("network.availabilityZones", LIST, "Zone names of the region the subnets go in: at least 2, in prod at least 3."),
    Key("network.natGateways", STRING, "One NAT gateway for the VPC, or one per zone.",
        default=Derived("perAz in prod, else single"), allowed=("single", "perAz")),
    Key("network.flowLogRetentionDays", INTEGER, "Days the VPC flow logs are kept.", default=90),
    Key("network.kubernetesServiceCidr", STRING, "The cluster's service CIDR.", default="172.20.0.0/16"),
    Key("network.monitoringIngress", MAPPING, "Who may reach the nodes' metrics and log ports (both keys or neither).",
        default={}),
    Key("network.monitoringIngress.cidrs", LIST, "Source CIDRs allowed in: one node security group rule per CIDR and "
        "port, all within serviceQuotas.securityGroupRules.", default=[]),
    Key("network.monitoringIngress.ports", LIST, "Node ports they may reach.", default=[], entries=INTEGER,
        minimum=1, maximum=65535),

    Key("viewer", MAPPING, "How the namespaces' TensorBoard is reached: one ALB per environment, a path per namespace, "
        "open to network.monitoringIngress.cidrs (else the VPC's range) only (components/config/viewer.py).",
        default={}, stacks=frozenset({PLATFORM})),
    Key("viewer.internetFacing", BOOLEAN, "An internet-facing ALB instead of an internal one; needs "
        "viewer.certificateArn.", default=False),
    Key("viewer.certificateArn", STRING, "ACM certificate (the stack's region) for HTTPS on 443, HTTP redirected to "
        "it; unset: HTTP on 80 only.", default=UNSET),

    Key("serviceQuotas", MAPPING, "The account's AWS quotas the config is checked against, where raised from AWS's "
        "defaults: raise one only after Service Quotas granted the increase (components/config/service_quotas.py).",
        default={}, stacks=frozenset({PLATFORM})),
    # Amazon VPC User Guide, "Amazon VPC quotas" (https://docs.aws.amazon.com/vpc/latest/userguide/
    # amazon-vpc-limits.html#vpc-limits-security-groups): inbound or outbound rules per security
    # group, 60 each by default, adjustable; "this quota multiplied by the quota for security groups
    # per network interface cannot exceed 1,000", so no account gets more than 1,000.
    Key("serviceQuotas.securityGroupRules", INTEGER, "Inbound (and, apart, outbound) rules per security group "
        "(Amazon VPC quotas); AWS caps it times security groups per network interface at 1000, and GPU nodes carry 2 "
        "groups, so at most 500 with GPU pools.",
        default=60, minimum=60, maximum=1000),
    # Amazon EKS User Guide, "View and manage Amazon EKS and Fargate service quotas"
    # (https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html): managed node groups per
    # cluster 30, nodes per managed node group 450, both adjustable; a declared quota is never below.
    Key("serviceQuotas.managedNodeGroupsPerCluster", INTEGER, "Managed node groups per cluster (Amazon EKS quotas): "
        "one per node pool.", default=30, minimum=30),
    Key("serviceQuotas.nodesPerManagedNodeGroup", INTEGER, "Nodes per managed node group (Amazon EKS quotas): the most "
        "a pool's size.max may be.", default=450, minimum=450),

    Key("fabric", MAPPING, "GPU fabric ports shared by the security groups and the training pods.", default={},
        stacks=frozenset({PLATFORM})),
    # Ports below 1024 need privileges the training pods do not have.
    Key("fabric.rendezvousPorts", LIST, "torchrun c10d rendezvous ports.", default=[29400], entries=INTEGER,
        minimum=1024, maximum=65535),
    Key("fabric.ncclPortRange", MAPPING, "The range pinned in the pods' net.ipv4.ip_local_port_range and opened "
        "between GPU nodes only.", default={"first": 50000, "last": 51999}),
    Key("fabric.ncclPortRange.first", INTEGER, "First port of the range.", minimum=1024, maximum=65535),
    Key("fabric.ncclPortRange.last", INTEGER, "Last port of the range.", minimum=1024, maximum=65535),

    Key("cluster", MAPPING, "EKS control plane.", stacks=frozenset({PLATFORM})),
    Key("cluster.kubernetesVersion", STRING,
        "A quoted minor from the dated calendar and pin set in components/facts/eks_versions.py; refused past its end of "
        "standard support in prod, and under upgradePolicy STANDARD anywhere; a warning 60 days ahead."),
    Key("cluster.upgradePolicy", STRING, "What EKS does at the end of standard support (docs/upgrading-and-pins.md).",
        allowed=("STANDARD", "EXTENDED")),
    Key("cluster.endpointPublicAccess", BOOLEAN, "Whether the API endpoint is public (never in prod).", default=False),
    Key("cluster.publicAccessCidrs", LIST, "Who may reach a public endpoint (needed with endpointPublicAccess).",
        default=[]),
    Key("cluster.adminPrincipals", LIST, "IAM role ARNs with cluster admin; must include the role that runs `pulumi up`.",
        default=[]),
    Key("cluster.readOnlyPrincipals", LIST, "IAM role ARNs with read-only cluster access.", default=[]),
    Key("cluster.logRetentionDays", INTEGER, "Days the control plane logs are kept; the audit log at least 365 in prod.",
        default=90),

    Key("nodePools", LIST, "EKS managed node groups, validated against EC2 instance facts; private subnets must hold "
        "every pool at size.max (docs/gpu-fabric-and-capacity.md).", stacks=frozenset({PLATFORM})),
    Key("nodePools[].name", STRING, "The pool's name: lowercase letters, digits and '-', at most 30 characters."),
    Key("nodePools[].instanceTypes", LIST, "EC2 instance types of the pool (a reserved pool: exactly one)."),
    Key("nodePools[].capacity", STRING, "How the nodes are bought: On-Demand, spot, a capacity block or an On-Demand "
        "Capacity Reservation.", allowed=("onDemand", "spot", "capacityBlock", "reservation")),
    Key("nodePools[].capacityReservationId", STRING,
        "`cr-` and 17 hex digits: the reservation of a capacityBlock or reservation pool.", default=UNSET),
    Key("nodePools[].capacityBlockEnd", STRING, "A capacityBlock pool's end, in UTC (2027-01-15T11:30:00Z): its queues "
        "hold before it, the pool is released on the day after.", default=Derived("required on a capacityBlock pool")),
    Key("nodePools[].gpu", BOOLEAN, "Whether the pool's nodes have GPUs."),
    Key("nodePools[].efa", BOOLEAN, "Whether the nodes get EFA interfaces (one zone, a cluster placement group).",
        default=False),
    Key("nodePools[].placementGroup", STRING, "EFA pools: the name of an existing cluster placement group to launch "
        "into; on a reservation only the group it was created in (a new one is refused).",
        default=Derived("a new one per EFA pool on onDemand or spot; none on a reservation or capacity block")),
    Key("nodePools[].size", MAPPING, "Node counts of the pool."),
    Key("nodePools[].size.min", INTEGER, "Fewest nodes (0: scales to zero; on a reservation, below max leaves paid "
        "instances without a node: make cost).", default=Derived("size.max on a reservation pool, else required"), minimum=0),
    Key("nodePools[].size.desired", INTEGER, "Nodes at creation, between min and max.",
        default=Derived("size.max on a reservation pool, else required"), minimum=0),
    Key("nodePools[].size.max", INTEGER, "Most nodes; on a reservation or capacity block its instance count.", minimum=1),
    Key("nodePools[].availabilityZones", LIST, "The pool's zones; GPU pools name AZ IDs (use1-az4), EFA and reserved "
        "pools exactly one, the reservation's.", default=Derived("the network's zones")),
    # nodeadm sets shutdownGracePeriod 150s, 30 s of it for critical pods, on Kubernetes 1.34 and later
    # (awslabs/amazon-eks-ami @81fec2e nodeadm/internal/kubelet/config.go:245-253), so a node stop, a
    # host-initiated shutdown or an auto-repair replacement gives other pods 120 s, whatever their
    # terminationGracePeriodSeconds. GPU pools state it in their own NodeConfig (node_bootstrap.py), long
    # enough for every job on the pool to write its last checkpoint (training.py checks each job's grace
    # against it): at most a job's longest grace (3600 s) + the 30 s (tests/test_config_keys.py holds it).
    Key("nodePools[].shutdownGracePeriodSeconds", INTEGER, "GPU pools: the kubelet's graceful node shutdown; the last 30 s "
        "go to critical pods, the rest to training pods, so it must exceed every job's terminationGracePeriodSeconds "
        "on the pool by 30.", default=150, minimum=150, maximum=3630),
    Key("nodePools[].releaseVersion", STRING, "GPU pools: the EKS-optimized AL2023 NVIDIA AMI release their nodes boot "
        "(<Kubernetes version>-<yyyymmdd>, of the cluster's minor); roll it monthly.",
        default=Derived("the minor's pin in components/facts/eks_versions.py (1.36: 1.36.3-20260903)")),
    Key("nodePools[].rootVolumeGiB", INTEGER, "Root volume size of each node.", default=Derived("200 for GPU pools, else 50"),
        minimum=20, maximum=16384),
    Key("nodePools[].labels", MAP, "Kubernetes labels of the nodes.", default={}),
    Key("nodePools[].taints", LIST, "Kubernetes taints of the nodes (each key and effect once).", default=[]),
    Key("nodePools[].taints[].key", STRING, "The taint's key."),
    Key("nodePools[].taints[].value", STRING, "The taint's value.", default=""),
    Key("nodePools[].taints[].effect", STRING, "The taint's effect.", allowed=("NoSchedule", "NoExecute", "PreferNoSchedule")),

    Key("storage", MAPPING, "S3 and EFS of the environment.", default={}, stacks=frozenset({PLATFORM})),
    Key("storage.checkpointRetentionDays", INTEGER, "Objects under checkpoints/ in the artifacts bucket expire after "
        "this many days.", default=30, minimum=1, maximum=3650),
    Key("storage.noncurrentVersionRetentionDays", INTEGER, "Days old object versions are kept, in both buckets.",
        default=30, minimum=1, maximum=3650),
    Key("storage.checkpointVersionRetentionDays", INTEGER, "Days a pruned or replaced checkpoint object under checkpoints/ "
        "is kept as an old version (at most 7: the launcher prunes every save, and replicas are kept in every region).",
        default=3, minimum=1, maximum=7),
    Key("storage.efsBackups", BOOLEAN, "Daily AWS Backup of the checkpoint file system (required in prod).",
        default=Derived("true in prod, else false")),
    Key("storage.datasetsBucket", STRING, "An existing bucket to read datasets from instead of creating one; a non-prod "
        "stack may not name a prod bucket.", default=UNSET),
    Key("storage.accessLogRetentionDays", INTEGER, "Days S3 server access logs are kept in the environment's access-log "
        "bucket; at least 365 in prod.", default=Derived("365 in prod, else 90"), minimum=1, maximum=3650),
    Key("storage.checkpointCleanup", MAPPING, "The nightly CronJob removing finished jobs' checkpoint directories on EFS.",
        default={}),
    Key("storage.checkpointCleanup.afterDays", INTEGER, "A finished job's directory unchanged this long is removed.",
        default=30, minimum=1, maximum=3650),
    Key("storage.checkpointCleanup.dryRun", BOOLEAN, "Only log what would be removed.", default=True),
    Key("storage.lustre", MAPPING, "FSx for Lustre for the training namespace's checkpoints and datasets.", default=UNSET),
    Key("storage.lustre.deploymentType", STRING, "The file system's deployment type.", default="PERSISTENT_2",
        allowed=("PERSISTENT_2",)),
    Key("storage.lustre.storageCapacityGiB", INTEGER, "1200, 2400, then steps of 2400.", minimum=1),
    Key("storage.lustre.throughputPerTiB", INTEGER, "MB/s per TiB: 125, 250, 500 or 1000."),
    Key("storage.lustre.readMBpsPerGpu", INTEGER, "Read throughput (MB/s) each GPU the file system serves must get: "
        "capacity x throughputPerTiB must give the training queue's GPUs x this.", minimum=1),
    Key("storage.lustre.availabilityZone", STRING, "An AZ ID such as use1-az4, or a network zone name; must be the zone "
        "of every EFA or reserved pool whose jobs use it.",
        default=Derived("the zone of the GPU pools its jobs run on (EFA and reserved first), else the network's first")),
    Key("storage.checkpointWriteMBps", INTEGER, "The checkpoint write throughput measured on this stack.",
        default=Derived("the file system's documented figure"), minimum=1),

    Key("registry", MAPPING, "ECR repository of the trainer image: tags immutable, scanned on push.", default={},
        stacks=frozenset({PLATFORM})),
    Key("registry.keepImages", INTEGER, "The newest N images stay (untagged ones expire after a day).", default=30,
        minimum=1, maximum=1000),

    Key("secrets", MAP, "Secret name -> value, each set with `pulumi config set --path --secret 'secrets.<name>' <value>` "
        "(never in plain text); a Secrets Manager secret `<project>/<environment>/<name>`, synced into the Kubernetes "
        "Secret training-secrets and read by the trainer as env var `<NAME>` (dashes -> underscores).",
        default=UNSET, stacks=BOTH),

    Key("observability", MAPPING, "Alerts and log retention.", default={}, stacks=frozenset({PLATFORM})),
    Key("observability.alertEmails", LIST, "Alert e-mail recipients (prod needs at least one recipient).", default=[]),
    Key("observability.alertSms", LIST, "Alert SMS recipients, E.164.", default=[]),
    Key("observability.gpuIdlePercent", INTEGER, "A GPU below this utilisation for gpuIdleMinutes alerts.", default=20,
        minimum=1, maximum=99),
    Key("observability.gpuIdleMinutes", INTEGER, "How long a GPU must stay idle before it alerts.", default=30,
        minimum=5, maximum=1440),
    Key("observability.gpuMemoryPercent", INTEGER, "GPU memory use that alerts (near 100%).", default=95,
        minimum=50, maximum=100),
    Key("observability.logRetentionDays", INTEGER, "Days Container Insights application logs are kept (performance "
        "logs: at most 30).", default=30),
    # A pod steps only after its rendezvous, data loading and checkpoint restore, which may take the
    # trainer's whole startup budget (workload/training_job.py STARTUP_BUDGET_SECONDS, 30 min; this
    # package imports nothing above it, tests/test_dashboards.py holds the two equal): "no step for N
    # minutes while pods run" alarms on every start if N is shorter.
    Key("observability.noStepMinutes", INTEGER, "A job whose namespace runs pods but that logged no training step "
        "this long alerts (multiple of 5, at least the trainer's 30-minute startup budget).", default=30,
        minimum=30, maximum=1440),
    # A job checkpoints every planned interval (components/observability/training_metrics.py); k times
    # it without a save, while it steps, means saves fail or hang. 3: one missed save is a slow file
    # system or a long eval, two more is a pattern.
    Key("observability.checkpointLateFactor", INTEGER, "A stepping job without a checkpoint for this many planned "
        "checkpoint intervals alerts.", default=3, minimum=2, maximum=10),
    Key("observability.nodeLogRetentionDays", INTEGER, "Days host and dataplane logs (with authpriv) are kept; at least "
        "365 in prod.", default=Derived("365 in prod, else 90")),

    Key("scaleDown", MAPPING, "Cluster Autoscaler timing, i.e. how long an idle GPU node is paid for (docs/cost.md).",
        default={}, stacks=frozenset({PLATFORM})),
    # The Cluster Autoscaler's defaults (FAQ: scale-down-unneeded-time 10m, scale-down-delay-after-add 10m).
    Key("scaleDown.unneededMinutes", INTEGER, "An unneeded node goes after this many minutes.", default=10,
        minimum=1, maximum=1440),
    Key("scaleDown.delayAfterAddMinutes", INTEGER, "No scale-down this long after a scale-up.", default=10,
        minimum=1, maximum=1440),

    Key("multiKueue", MAPPING, "This cluster's part in one job queue over the environment's clusters in several "
        "regions (Kueue MultiKueue, docs/multi-region.md); left out, the cluster is on its own.", default={},
        stacks=frozenset({PLATFORM})),
    Key("multiKueue.role", STRING, "manager: dispatches the environment's jobs to the workers; worker: admits them.",
        allowed=("manager", "worker")),
    Key("multiKueue.manager", STRING, "A worker's manager stack (its dispatcher role gets this cluster's access entry).",
        default=UNSET),
    Key("multiKueue.managerRegion", STRING,
        "A worker's manager's region (its stack file's region): its checkpoints replicate there.",
        default=UNSET),
    Key("multiKueue.workers", LIST, "A manager's worker stacks, most preferred first (at most 20).", default=UNSET),
    Key("multiKueue.workers[].stack", STRING, "A platform stack of the same environment, e.g. prod-usw2."),
    Key("multiKueue.workers[].region", STRING, "The worker stack's region, as its stack file sets it."),
    # At most what the manager may hold in flight for one worker: a p5en/p5 UltraCluster of 64 nodes x 8.
    Key("multiKueue.workers[].gpus", INTEGER,
        "The most GPUs the manager dispatches to it at once, at most its training.gpuQuota total.", minimum=1, maximum=512),

    Key("budget", MAPPING, "Monthly AWS Budget of the stack (required in prod, platform and team stacks).", default={},
        stacks=BOTH),
    Key("budget.monthlyLimitUsd", INTEGER, "The monthly limit in whole US dollars.", minimum=1),
    Key("budget.actualPercent", LIST, "Alert thresholds on actual spend, % of the limit, to the platform's alert topic.",
        default=[80, 100], entries=INTEGER, minimum=1, maximum=1000),
    Key("budget.forecastPercent", LIST, "Alert thresholds on forecast spend, % of the limit.", default=[100], entries=INTEGER,
        minimum=1, maximum=1000),
    Key("budget.activateCostAllocationTags", BOOLEAN,
        "false: the bootstrap activates the tag keys once; true: the stack activates the keys its budget filters by "
        "too, which needs a principal allowed ce:UpdateCostAllocationTagsStatus, not the CI deploy role (never in an "
        "AWS Organizations member account).", default=False),

    Key("trainerImage", STRING, "The trainer image pinned by digest (`<repo>@sha256:...`); `scripts/build-image <stack>` "
        "prints the command that sets it (for a team stack, with `--repository` its platform's `trainerRepositoryUrl`: "
        "team stacks have no repository). Jobs use it unless they name their own `image`; the checkpoint cleanup "
        "CronJob runs on it.", default=UNSET, stacks=BOTH),
    Key("trainerImageCuda", STRING, "The CUDA major.minor of `trainerImage` (a digest cannot be inspected offline): "
        "every job's pool must run it, from its GPUs' first CUDA (B200: 12.8) to the EKS NVIDIA AMI driver's newest "
        "major (components/facts/cuda.py).", default=Derived("12.6, the CUDA of trainer/Dockerfile's base"), stacks=BOTH),

    Key("teams", LIST, "The environment's teams: the platform stack makes each team's Kueue ClusterQueue "
        "`team-<name>` (its quota, borrowing limits, cohort, preemption, flavors); a team stack makes only its "
        "LocalQueue onto it. The platform's own and every team's owned quota must fit each pool together.",
        default=[], stacks=frozenset({PLATFORM})),
    Key("teams[].name", STRING, "The team, as in its stack team-<name>-<env>."),
    Key("teams[].gpuQuota", MAP, "GPU pool name -> GPUs the team's ClusterQueue may use; owned quota is lent while "
        "idle.", entries=INTEGER, minimum=0),
    Key("teams[].gpuQuotaBorrowed", LIST, "Pools of the row's gpuQuota the team borrows instead of owning "
        "(nominalQuota 0, borrowingLimit the quota); another queue must own some of each.", default=[]),
    Key("teams[].gpuBorrowingLimit", MAP, "Owned pool name -> GPUs the team may borrow beyond its quota while others "
        "leave them idle; quota + limit at most the pool's GPUs.", default=Derived("0 on every pool: never unbounded"),
        entries=INTEGER, minimum=0),

    Key("training", MAPPING, "The training namespace's quota and jobs.", default={}, stacks=BOTH),
    Key("training.gpuQuota", MAP, "GPU pool name -> GPUs: this namespace's Kueue ClusterQueue; idle quota is lent "
        "within the environment's cohort. Platform stacks only: a team's quota is its row of the platform's `teams`.",
        default={}, entries=INTEGER, minimum=0),
    Key("training.gpuQuotaBorrowed", LIST, "Pools of gpuQuota whose quota the queue borrows instead of owning: its "
        "ClusterQueue gets nominalQuota 0 and borrowingLimit = the quota, so its jobs run on GPUs the cohort's other "
        "queues leave idle and are preempted when those reclaim them. Platform stacks only (a team's is in `teams`).",
        default=[]),
    Key("training.jobs", LIST, "The training jobs.", default=[]),
    Key("training.jobs[].name", STRING, "The job's name: a DNS label of at most 40 characters."),
    Key("training.jobs[].pool", STRING, "The GPU pool the job runs on."),
    Key("training.jobs[].nodes", INTEGER, "Nodes of the job.", minimum=1),
    Key("training.jobs[].gpusPerNode", INTEGER, "GPUs per node.", minimum=1),
    Key("training.jobs[].image", STRING, "The job's image pinned by digest.", default=Derived("trainerImage")),
    Key("training.jobs[].imageCuda", STRING, "The CUDA major.minor of the job's image, checked against its pool's "
        "GPUs and driver.", default=Derived("trainerImageCuda")),
    Key("training.jobs[].hyperparameters", STRING, "The job's hyperparameters file, inside the repository.",
        default="trainer/example_trainer/hparams.yaml"),
    Key("training.jobs[].secrets", LIST, "Names of `secrets` entries the job gets as env vars.", default=[]),
    Key("training.jobs[].env", MAP, "Env var name -> text value.", default={}),
    Key("training.jobs[].args", LIST, "The container's arguments, which replace the image's CMD (the launcher's "
        "training command).", default=Derived("none: the image's own CMD")),
    Key("training.jobs[].cpu", INTEGER, "CPUs requested, and the CPU limit.", default=Derived("a computed request, no limit"),
        minimum=1),
    Key("training.jobs[].memoryGiB", INTEGER, "Memory requested.", default=Derived("the job's share of the node"), minimum=1),
    Key("training.jobs[].sharedMemoryGiB", INTEGER, "Size of /dev/shm (memory the pod's limit counts; at most a quarter "
        "of it).", default=Derived("GPUs per node x loaderWorkersPerGpu x 1 GiB, at most a quarter of the pod's memory"),
        minimum=1),
    Key("training.jobs[].loaderWorkersPerGpu", INTEGER, "DataLoader worker processes per GPU that the default "
        "sharedMemoryGiB is sized for.", default=4, minimum=0, maximum=64),
    Key("training.jobs[].maxRestarts", INTEGER, "Restarts after failures of the job.", default=3, minimum=0, maximum=100),
    # A spot gang of 4 nodes at one interruption per node-day sees about 4 a day: 20 is days
    # of spot churn, while a job that evicts itself (e.g. overflowing /tmp) stops after 20.
    Key("training.jobs[].maxDisruptionRestarts", INTEGER, "Restarts after disruptions (spot, maintenance); restarts in "
        "all are bounded by maxRestarts + maxDisruptionRestarts.", default=20, minimum=0, maximum=1000),
    Key("training.jobs[].terminationGracePeriodSeconds", INTEGER, "Time a stopping pod gets to write its last "
        "checkpoint; on a spot pool at most 100 (EC2 terminates the node 120 s after its interruption notice).",
        default=Derived("120; 100 on a spot pool"), minimum=30, maximum=3600),
    Key("training.jobs[].heartbeatTimeoutSeconds", INTEGER, "A rank silent this long fails the job.", default=600,
        minimum=60, maximum=86400),
    Key("training.jobs[].checkpointIntervalSeconds", INTEGER, "Seconds between checkpoints.",
        default=Derived("the trainer's own"), minimum=60),
    Key("training.jobs[].memoryCheckpointSeconds", INTEGER, "Seconds between checkpoints into the pod's memory (an "
        "emptyDir of medium Memory), persisted to the shared file system every checkpointIntervalSeconds; an in-place "
        "restart resumes from the newer. Needs checkpointIntervalSeconds (longer) and checkpointGiB: 2 copies and a "
        "host buffer, with sharedMemoryGiB, fit in half the pod's memory. The example trainer and the plain integration use it "
        "(docs/trainer-io-and-storage.md).", default=Derived("off"), minimum=5, maximum=86400),
    Key("training.jobs[].checkpointGiB", INTEGER, "One checkpoint of the whole job: the grace period must cover writing "
        "it; required in prod stacks.", default=UNSET, minimum=1),
    Key("training.jobs[].checkpointWriters", STRING, "rank0: rank 0 writes the whole checkpoint; allRanks: every rank "
        "writes its own file, as the example trainer does (its share of the replicated state) and DCP (sharded state). "
        "Sets the write speed of the grace-period check and the Lustre sizing.",
        default="rank0", allowed=("rank0", "allRanks")),
    Key("training.jobs[].ttlSecondsAfterFinished", INTEGER, "Seconds a finished job stays in Kubernetes.",
        default=Derived("off: a refresh would re-run a job Kubernetes deleted"), minimum=0),

    Key("placeholders", MAPPING, "What a real deploy does with the example values the stack files ship with "
        "(components/config/placeholders.py; docs/first-deploy.md).", default={}, stacks=BOTH),
    Key("placeholders.allow", BOOLEAN, "true (dev stacks only): `pulumi up` and `pulumi preview` deploy them with a "
        "warning instead of refusing them; the offline plan always lists them.", default=False),

    Key("platformStack", STRING, "The environment's platform stack, whose contract the team stack reads (its SSM "
        "parameter /<project>/<stack>/platform-contract).",
        default=Derived("`organization/gpu-training/<environment>`, the DIY-backend form"), stacks=frozenset({TEAM})),
    Key("members", LIST, "IAM role ARNs of the team's people: each gets an EKS access entry with rights in the team's "
        "namespace only (view, and submitting JobSets: components/workload/team_members.py); in the stack's "
        "partition, and not one of the platform's cluster principals.", default=[], stacks=frozenset({TEAM})),
)

BY_PATH = {key.path: key for key in KEYS}
PROJECT = "gpu-training"
"""The project whose keys these are: its keys are spelled `gpu-training:<path>` in messages and stack files."""


def own_row_of(key: str) -> Key | None:
    """The row of the key itself (`gpu-training:nodePools[1].size.max`), not of a list or map it is an item of."""
    if not key.startswith(f"{PROJECT}:"):
        return None
    return BY_PATH.get(re.sub(r"\[\d+\]", "[]", key[len(PROJECT) + 1:]))


def row_of(key: str) -> Key | None:
    """The row of a key as the parsers spell it (`gpu-training:nodePools[1].size.max`, a map's entry
    `gpu-training:training.gpuQuota.gpu-spot`: its map's row); None for another project's key or a
    key the table lacks."""
    exact = own_row_of(key)
    if exact is not None or not key.startswith(f"{PROJECT}:"):
        return exact
    general = re.sub(r"\[\d+\]", "[]", key[len(PROJECT) + 1:])
    # An item of a list of values, or an entry of a map (its name, chosen by the user, may hold dots).
    return next((row for row in KEYS if row.type in (LIST, MAP) and not any(k.path.startswith(f"{row.path}[].") for k in KEYS)
                 and (general == f"{row.path}[]" or (row.type == MAP and general.startswith(f"{row.path}.")))), None)


def integer_default_of(path: str) -> int:
    """The default of the integer row at `path`, for code beyond the parsers (a dataclass's own default, a message)."""
    default = BY_PATH[path].default
    assert isinstance(default, int) and not isinstance(default, bool), f"{path} has no integer default"
    return default


def text_default_of(path: str) -> str:
    default = BY_PATH[path].default
    assert isinstance(default, str), f"{path} has no text default"
    return default


def boolean_default_of(path: str) -> bool:
    default = BY_PATH[path].default
    assert isinstance(default, bool), f"{path} has no boolean default"
    return default


def minimum_of(path: str) -> int:
    bound = BY_PATH[path].minimum
    assert bound is not None, f"{path} has no minimum"
    return bound


def maximum_of(path: str) -> int:
    bound = BY_PATH[path].maximum
    assert bound is not None, f"{path} has no maximum"
    return bound


def expected_type(path: str) -> str | None:
    """The type a value at `path` must have (`nodePools[1].size.max`, `training.gpuQuota.gpu-spot`:
    a list's item, a map's entry); None where the table does not say."""
    general = re.sub(r"\[\d+\]", "[]", path)
    if general in BY_PATH:
        return BY_PATH[general].type
    if general.endswith("[]"):
        container = BY_PATH.get(general[:-2])
    else:  # an entry of a map: its name, chosen by the user, may hold dots (a label's)
        container = next((key for key in KEYS if key.type == MAP and general.startswith(f"{key.path}.")), None)
    if container is None or container.type not in (LIST, MAP):
        return None
    if any(key.path.startswith(f"{container.path}[].") for key in KEYS):
        return MAPPING
    return container.entries


def top_level_keys() -> tuple[Key, ...]:
    return tuple(key for key in KEYS if key.stacks is not None)


def stacks_of(key: Key) -> frozenset[str]:
    """The kinds of stack that may set `key`: those of its top-level key."""
    stacks = BY_PATH[key.top].stacks
    assert stacks is not None, f"{key.top} is a top-level key without stack kinds"
    return stacks


PLATFORM_ONLY_KEYS = tuple(key.path for key in top_level_keys() if key.stacks == frozenset({PLATFORM}))
"""Keys only a platform stack may set: a team stack cannot create or change shared infrastructure."""
