"""What each kind of stack may create: one table, read by the `allowed-resource-types` policy.

An entry is (type, kinds, reason): the exact resource type (or a package's prefix ending in `*`),
the stack kinds it is allowed in (`platform`, `team`, `bootstrap`; resources.stack_kind_of says
which a stack is), and one line saying why. Anything not listed is refused: `aws-native`,
`command`, dynamic providers (`pulumi-python:dynamic:Resource`), any other package, and any type
of a listed package that no entry names. To let the program create a new type, add its line here
(policy/tests/test_allowed_types.py checks that every planned type is listed for its stack kind, and that
no entry is unused unless its reason says "not in any plan" and why).
"""

from __future__ import annotations

from typing import NamedTuple

PLATFORM, TEAM, BOOTSTRAP = "platform", "team", "bootstrap"
KINDS = (PLATFORM, TEAM, BOOTSTRAP)
# The phrase an entry's reason carries when no offline plan creates the type (then it says why).
UNPLANNED = "not in any plan"


class Allowed(NamedTuple):
    type: str
    kinds: str
    reason: str


P, T, B, PT, PTB, PB = "platform", "team", "bootstrap", "platform team", "platform team bootstrap", "platform bootstrap"

ALLOWED_TYPES: tuple[Allowed, ...] = (
    # --- the engine and this program's own components
    Allowed("pulumi:providers:aws", PTB, "the stack's AWS provider, which carries the region and the cost tags"),
    Allowed("pulumi:providers:kubernetes", PT, "the stack's cluster provider (kubeconfig of the environment's cluster)"),
    Allowed("pulumi:pulumi:Stack", PTB, "the engine's root resource (not in any plan: the mock engine registers none)"),
    Allowed("pulumi:pulumi:StackReference", T, "another stack's outputs (not in any plan: a read; a team stack of "
            "this program reads its platform's contract parameter instead, and its team role could not read one)"),
    Allowed("gpu-training:bootstrap:*", B, "the bootstrap's components (they create nothing; children checked)"),
    Allowed("gpu-training:cluster:*", P, "the cluster's components (children checked one by one)"),
    Allowed("gpu-training:common:*", P, "shared components such as the logs key (children checked)"),
    Allowed("gpu-training:data:*", PT, "storage components: buckets, file systems, a team's mounts (children checked)"),
    Allowed("gpu-training:identity:*", PT, "workload role components (children checked)"),
    Allowed("gpu-training:network:*", P, "network components (children checked)"),
    Allowed("gpu-training:observability:*", PT, "logs, alarms and budget components (children checked)"),
    Allowed("gpu-training:secrets:*", PT, "secrets and their sync (children checked)"),
    Allowed("gpu-training:workload:*", PT, "namespaces, queues, jobs (children checked)"),
    # --- network (the environment's VPC: platform only)
    Allowed("aws:ec2/vpc:Vpc", P, "the environment's VPC"),
    Allowed("aws:ec2/subnet:Subnet", P, "private node subnets and public NAT subnets"),
    Allowed("aws:ec2/internetGateway:InternetGateway", P, "egress of the NAT gateways"),
    Allowed("aws:ec2/natGateway:NatGateway", P, "node egress to the internet"),
    Allowed("aws:ec2/eip:Eip", P, "the NAT gateways' addresses"),
    Allowed("aws:ec2/routeTable:RouteTable", P, "subnet routing"),
    Allowed("aws:ec2/routeTableAssociation:RouteTableAssociation", P, "subnet routing"),
    Allowed("aws:ec2/vpcEndpoint:VpcEndpoint", P, "private access to AWS APIs"),
    Allowed("aws:ec2/flowLog:FlowLog", P, "VPC flow logs"),
    Allowed("aws:ec2/securityGroup:SecurityGroup", P, "node, fabric and endpoint groups"),
    Allowed("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup", P, "closes the VPC's default group"),
    Allowed("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", P, "one rule per resource (network policies)"),
    Allowed("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", P, "one rule per resource"),
    Allowed("aws:ec2/placementGroup:PlacementGroup", P, "cluster placement of EFA GPU nodes"),
    Allowed("aws:ec2/vpcPeeringConnection:VpcPeeringConnection", P,
            "a MultiKueue manager's peering to each worker's VPC (its own environment's: components/network/peering.py)"),
    Allowed("aws:ec2/vpcPeeringConnectionAccepter:VpcPeeringConnectionAccepter", P,
            "the manager accepts that peering in the worker's Region (same account)"),
    # --- cluster and nodes
    Allowed("aws:eks/cluster:Cluster", P, "the environment's EKS cluster"),
    Allowed("aws:eks/nodeGroup:NodeGroup", P, "managed node pools"),
    Allowed("aws:eks/addon:Addon", P, "EKS add-ons (CNI, CSI drivers, Pod Identity agent)"),
    Allowed("aws:eks/accessEntry:AccessEntry", PT, "cluster access of the node and CI roles (teams: their people, "
            "in the members group of their namespace)"),
    Allowed("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", PT,
            "cluster access policies of those entries (teams: View, scoped to their namespace)"),
    Allowed("aws:eks/podIdentityAssociation:PodIdentityAssociation", PT, "a role for a service account (teams: their namespace)"),
    Allowed("aws:ec2/launchTemplate:LaunchTemplate", P, "node launch templates (IMDSv2, encrypted volumes)"),
    Allowed("aws:autoscaling/tag:Tag", P, "Cluster Autoscaler tags on the node groups' Auto Scaling groups"),
    # --- storage
    Allowed("aws:s3/bucket:Bucket", PB, "datasets, artifacts, access logs; the state bucket"),
    Allowed("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", PB, "bucket SSE-KMS"),
    Allowed("aws:s3/bucketVersioning:BucketVersioning", PB, "bucket versioning"),
    Allowed("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", PB, "blocks public access"),
    Allowed("aws:s3/bucketPolicy:BucketPolicy", PB, "TLS-only and log delivery policies"),
    Allowed("aws:s3/bucketOwnershipControls:BucketOwnershipControls", PB, "disables ACLs"),
    Allowed("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", PB, "expires old versions and logs"),
    Allowed("aws:s3/bucketLogging:BucketLogging", PB, "server access logging (the state bucket's too)"),
    Allowed("aws:s3/bucketReplicationConfig:BucketReplicationConfig", P, "datasets/checkpoints to a regional sibling"),
    Allowed("aws:efs/fileSystem:FileSystem", P, "the checkpoint file system"),
    Allowed("aws:efs/mountTarget:MountTarget", P, "its mount targets"),
    Allowed("aws:efs/fileSystemPolicy:FileSystemPolicy", P, "its TLS-only policy"),
    Allowed("aws:efs/backupPolicy:BackupPolicy", P, "its backups"),
    Allowed("aws:efs/accessPoint:AccessPoint", P, "a tenant's checkpoint directory, each registered team's included "
            "(a team's deploy role may not make one: components/workload/team_volumes.py)"),
    Allowed("aws:fsx/lustreFileSystem:LustreFileSystem", P, "the Lustre scratch file system"),
    Allowed("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", P, "links Lustre to the datasets bucket"),
    Allowed("aws:ecr/repository:Repository", P, "the trainer image registry"),
    Allowed("aws:ecr/lifecyclePolicy:LifecyclePolicy", P, "expires old images"),
    # --- identity, keys, secrets
    Allowed("aws:iam/role:Role", PTB, "workload, node and CI roles (teams: under their name prefix)"),
    Allowed("aws:iam/rolePolicy:RolePolicy", PTB, "inline role permissions (checked statement by statement)"),
    Allowed("aws:iam/rolePolicyAttachment:RolePolicyAttachment", PB, "AWS managed policies of the EKS and node roles; CI roles"),
    Allowed("aws:iam/policy:Policy", B, "the environments' permissions boundaries"),
    Allowed("aws:iam/openIdConnectProvider:OpenIdConnectProvider", B, "GitHub Actions' OIDC provider"),
    Allowed("aws:kms/key:Key", PTB, "customer managed keys (team stacks: their secrets key)"),
    Allowed("aws:kms/alias:Alias", PTB, "key aliases"),
    Allowed("aws:secretsmanager/secret:Secret", PT, "training secrets (team stacks: under their path)"),
    Allowed("aws:ssm/parameter:Parameter", P, "the platform's contract, which its team stacks read (components/platform.py)"),
    Allowed("aws:secretsmanager/secretVersion:SecretVersion", PT, "their values, set as Pulumi secrets"),
    # --- observability and cost
    Allowed("aws:cloudwatch/logGroup:LogGroup", P, "control-plane, flow and container logs"),
    Allowed("aws:cloudwatch/logMetricFilter:LogMetricFilter", P, "metrics from logs"),
    Allowed("aws:cloudwatch/metricAlarm:MetricAlarm", PT, "alarms (teams: per-job alarms of their own jobs)"),
    Allowed("aws:cloudwatch/dashboard:Dashboard", PT, "the environment's dashboard (teams: their jobs' dashboard)"),
    Allowed("aws:sns/topic:Topic", P, "the alerts topic"),
    Allowed("aws:sns/topicPolicy:TopicPolicy", P, "who may publish to it"),
    Allowed("aws:sns/topicSubscription:TopicSubscription", P, "who is told"),
    Allowed("aws:budgets/budget:Budget", PT, "every stack's budget"),
    Allowed("aws:costexplorer/costAllocationTag:CostAllocationTag", B, "activates the cost tags account-wide"),
    # --- Kubernetes
    Allowed("kubernetes:helm.sh/v3:Release", P, "cluster add-ons (Kueue, JobSet, External Secrets, LB controller, ...)"),
    Allowed("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", P, "the ProvisioningRequest API"),
    Allowed("kubernetes:storage.k8s.io/v1:StorageClass", P, "EFS/Lustre storage classes"),
    Allowed("kubernetes:core/v1:Namespace", P, "training namespaces, each registered team's team-<team> included "
            "(a team's deploy role may not make one: components/workload/team_tenancy.py)"),
    Allowed("kubernetes:core/v1:ServiceAccount", PT, "the trainer's service account"),
    Allowed("kubernetes:core/v1:ConfigMap", PT, "job configuration (teams: also the job context, the non-secret "
            "config the job command judges ad-hoc jobs against)"),
    Allowed("kubernetes:core/v1:Secret", P, "a MultiKueue manager's kubeconfig Secret per worker, created empty: its "
            "rotation CronJob writes the short-lived token (no-plaintext-secrets refuses data in the plan)"),
    Allowed("kubernetes:core/v1:LimitRange", P, "namespace defaults (a team's too: the platform's, like its quota)"),
    Allowed("kubernetes:core/v1:ResourceQuota", P, "namespace quota (a team's too: the platform owns quotas)"),
    Allowed("kubernetes:core/v1:PersistentVolume", P, "static volumes of the shared file systems, each registered "
            "team's included (cluster-scoped: components/workload/team_volumes.py)"),
    Allowed("kubernetes:core/v1:PersistentVolumeClaim", PT, "claims of those volumes (teams: of their platform's)"),
    Allowed("kubernetes:networking.k8s.io/v1:NetworkPolicy", PT, "namespace isolation"),
    Allowed("kubernetes:rbac.authorization.k8s.io/v1:Role", PT, "namespace roles"),
    Allowed("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", PT, "namespace role bindings"),
    Allowed("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", P,
            "keeps each trainer pod's API token to its own pod's progress annotation; what no team namespace may "
            "make (Ingress values, Services, NetworkPolicies, work without a queue name), refused by the API server"),
    Allowed("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding", P,
            "applies those policies (every namespace, or every team-* namespace)"),
    Allowed("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", P,
            "a MultiKueue worker's rights for its manager: writes bound per namespace, cluster-wide reads; the team "
            "deployers' custom resources, bound in each team's namespace"),
    Allowed("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", P, "binds the read role to the manager's group"),
    Allowed("kubernetes:apps/v1:Deployment", PT, "the namespace's run viewer (TensorBoard)"),
    Allowed("kubernetes:core/v1:Service", PT, "the viewer's ClusterIP service (teams: in their namespace)"),
    Allowed("kubernetes:networking.k8s.io/v1:Ingress", PT, "the viewer's path on the environment's ALB (teams: their path)"),
    Allowed("kubernetes:batch/v1:Job", P, "one-off setup jobs (checkpoint directory)"),
    Allowed("kubernetes:batch/v1:CronJob", PT, "checkpoint cleanup"),
    Allowed("kubernetes:external-secrets.io/v1:SecretStore", PT, "the namespace's store (teams: their reader role)"),
    Allowed("kubernetes:external-secrets.io/v1:ExternalSecret", PT, "synced secrets"),
    Allowed("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", PT, "training jobs"),
    Allowed("kubernetes:policy/v1:PodDisruptionBudget", PT, "a non-spot gang's pods: no voluntary eviction (a node "
            "group update fails instead of draining it); for team stacks not in any plan: the example team's "
            "job runs on spot, which gets none"),
    Allowed("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", P, "the namespace's queue, and each registered team's "
            "(gpu-training:teams; a team stack makes none)"),
    Allowed("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", PT, "the namespace's local queue"),
    Allowed("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", P, "GPU pool flavors"),
    Allowed("kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck", P, "provisioning admission check"),
    Allowed("kubernetes:kueue.x-k8s.io/v1beta2:ProvisioningRequestConfig", P, "its configuration"),
    Allowed("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueCluster", P, "a MultiKueue manager's worker cluster"),
    Allowed("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueConfig", P, "the manager's set of worker clusters"),
)


def allowed_entry(resource_type: str, kind: str) -> Allowed | None:
    """The entry that allows `resource_type` in a stack of `kind`, or None."""
    for entry in ALLOWED_TYPES:
        if kind not in entry.kinds.split():
            continue
        if entry.type == resource_type or (entry.type.endswith("*") and resource_type.startswith(entry.type[:-1])):
            return entry
    return None
