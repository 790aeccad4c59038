"""Who pays, who provides, and what a stack may touch: cost tags, explicit providers, team stacks
that stay inside their team, and non-prod stacks that stay away from prod data."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    PolicyConfigSchema,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
)

from gpu_training_policy.allowed_types import ALLOWED_TYPES, allowed_entry
from gpu_training_policy.evaluator import allows_outside, evaluate, plain
from gpu_training_policy.reach import CONTEXT, OTHER_TEAM, generic_of, outside_of, owns_role_name
from gpu_training_policy.resources import (
    COST_TAGS,
    TEAM_TAG,
    Report,
    Stack,
    as_list,
    describe,
    get,
    has,
    is_list,
    json_document,
    known,
    package_of,
    provider_default_tags,
    stack_kind,
    stack_of,
    statements,
    strings,
)
from gpu_training_policy.rules import resource_rule, stack_rule
from gpu_training_policy.tenancy import (
    ACCESS_ASSOCIATION,
    ACCESS_ENTRY,
    access_association_problems,
    access_entry_problems,
)

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
# What launch templates tag: AWS provider default tags do not reach tag_specifications
# (hashicorp/terraform-provider-aws#19387), so these carry the cost tags themselves.
TAGGED_AT_LAUNCH = ("instance", "volume")


# --- cost-tags --------------------------------------------------------------------------------

def _required_tags(args: ResourceValidationArgs) -> tuple[str, ...]:
    """The cost tags; `environment` only on a stack of an environment (not on the bootstrap, which
    serves them all), `team` on team stacks."""
    stack = stack_of(args.urn, args.provider)
    return (tuple(t for t in COST_TAGS if t != "environment" or stack.environment)
            + ((TEAM_TAG,) if stack.is_team else ()))


@resource_rule(Severity.MEDIUM)
def cost_tags(args: ResourceValidationArgs, report: Report) -> None:
    """Every AWS resource, and every instance and volume a launch template starts, carries the cost tags project, environment,
    stack, cost-center (and team on team stacks)."""
    if package_of(args.resource_type) != "aws":
        return
    what = describe(args.name, args.resource_type)
    required = _required_tags(args)
    tags = {**provider_default_tags(args.provider), **{str(k): str(v) for k, v in (known(args.props, "tags") or {}).items()}}
    missing = [t for t in required if not tags.get(t)]
    if missing:
        report(f"{what} would not carry the cost tags {', '.join(missing)}. They come from the AWS provider's "
               "default tags (components/common/tags.py); use that provider.")
    if args.resource_type == LAUNCH_TEMPLATE:
        specs = {get(s, "resourceType"): s for s in as_list(get(args.props, "tagSpecifications"))}
        for kind in TAGGED_AT_LAUNCH:
            launched = {str(k): str(v) for k, v in (known(specs.get(kind), "tags") or {}).items()}
            absent = [t for t in required if not launched.get(t)]
            if absent:
                report(f"{what} launches {kind}s without the cost tags {', '.join(absent)}: provider default tags "
                       "do not reach tag_specifications, so the template must list them.")


# --- explicit-provider ------------------------------------------------------------------------

@resource_rule(Severity.MEDIUM)
def explicit_provider(args: ResourceValidationArgs, report: Report) -> None:
    """Every resource uses an explicit provider, never a default one."""
    provider = args.provider
    # Default providers are named `default` or `default_<version>` by the engine. The built-in
    # `pulumi` package (StackReference) always runs on its default provider and has no other.
    if package_of(args.resource_type) == "pulumi":
        return
    if provider is not None and (provider.name == "default" or provider.name.startswith("default_")):
        package = provider.resource_type.removeprefix("pulumi:providers:")
        report(f"{describe(args.name, args.resource_type)} uses the default {package} provider, which has no "
               "default tags and follows the ambient credentials and region. Pass the stack's provider "
               "(opts=pulumi.ResourceOptions(providers=[...])).")


# --- team-stack-scope -------------------------------------------------------------------------

# Shared infrastructure belongs to the platform stack of the environment (components/team.py).
PLATFORM_ONLY_TYPES = {
    "aws:ec2/vpc:Vpc": "a VPC",
    "aws:ec2/subnet:Subnet": "a subnet",
    "aws:ec2/internetGateway:InternetGateway": "an internet gateway",
    "aws:ec2/natGateway:NatGateway": "a NAT gateway",
    "aws:ec2/securityGroup:SecurityGroup": "a security group",
    "aws:eks/cluster:Cluster": "an EKS cluster",
    "aws:eks/nodeGroup:NodeGroup": "a node group",
    "aws:eks/fargateProfile:FargateProfile": "a Fargate profile",
    "aws:eks/addon:Addon": "an EKS add-on",
    "aws:ec2/launchTemplate:LaunchTemplate": "a launch template",
    "aws:autoscaling/group:Group": "an Auto Scaling group",
    "aws:s3/bucket:Bucket": "a bucket",
    "aws:s3/bucketV2:BucketV2": "a bucket",
    "aws:efs/fileSystem:FileSystem": "a file system",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "a file system",
    "aws:ecr/repository:Repository": "a container registry",
    "aws:iam/user:User": "an IAM user",
    "aws:iam/accessKey:AccessKey": "an IAM access key",
    "aws:iam/group:Group": "an IAM group",
    "aws:eks/identityProviderConfig:IdentityProviderConfig": "an EKS identity provider",
    # One per file system, key or repository: a team's would replace the platform's on a shared one.
    "aws:efs/fileSystemPolicy:FileSystemPolicy": "a file system policy",
    "aws:efs/backupPolicy:BackupPolicy": "a file system backup policy",
    "aws:efs/mountTarget:MountTarget": "a mount target",
    "aws:efs/replicationConfiguration:ReplicationConfiguration": "a file system replication",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "a file system's data repository",
    "aws:kms/keyPolicy:KeyPolicy": "a key policy",
    "aws:kms/grant:Grant": "a key grant",
    "aws:ecr/repositoryPolicy:RepositoryPolicy": "a registry policy",
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": "a registry lifecycle policy",
    # What it installs is applied by Helm, not registered with the engine: no policy sees it.
    "kubernetes:helm.sh/v3:Release": "a Helm release",
}
CLUSTER_ACCESS = {ACCESS_ENTRY: access_entry_problems, ACCESS_ASSOCIATION: access_association_problems}
# A team stack creates no bucket, so anything else of S3 (a bucket setting: policy, lifecycle,
# versioning, ...; access points, inventories, account-wide blocks, S3 Control) would act on the
# shared buckets or the account, replacing the platform's. Objects are the exception, under the
# team's prefix.
S3_PACKAGES = ("aws:s3/", "aws:s3control/")
S3_OBJECTS = ("aws:s3/bucketObject:BucketObject", "aws:s3/bucketObjectv2:BucketObjectv2", "aws:s3/objectCopy:ObjectCopy")
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
# What a team namespace's pods may not loosen: `privileged` lets a pod take its node, and with it
# every other team's pods and volumes there (components/workload/namespace.py sets baseline).
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
TEAM_POD_SECURITY_LEVELS = ("baseline", "restricted")
# Kubernetes types that are components, not objects: Helm charts, YAML and Kustomize, whose objects
# are registered, and checked, one by one.
NON_OBJECT_KUBERNETES_TYPES = ("kubernetes:helm.sh/v3:Chart", "kubernetes:helm.sh/v4:", "kubernetes:yaml",
                               "kubernetes:kustomize")
# The cluster-scoped Kubernetes objects a team stack makes (components/team.py), each bound to the
# team: its namespace and the persistent volumes its claims bind. Its Kueue ClusterQueues (named as
# the namespace, and `<namespace>.any-region` on a MultiKueue manager: with a dot, which no namespace
# holds) are the platform's, made from its registry of teams (components/workload/team_queues.py,
# judged by gpu_training_policy/queues.py); the team's LocalQueues point only at them. Every other
# Kubernetes object of a team stack lives in the team's namespace: a ClusterRoleBinding, a CRD or
# a webhook configuration would reach the whole cluster.
TEAM_CLUSTER_SCOPED_KINDS = ("Namespace",)  # and persistent volumes, judged by their claim
TEAM_CLUSTER_QUEUE_SUFFIXES = ("", ".any-region")
# Cluster-scoped kinds, whatever `metadata.namespace` an object of them says (the API server
# ignores it): Kubernetes' own and those of the add-ons the platform installs. Any kind named
# Cluster* counts too (ClusterRole, ClusterRoleBinding, External Secrets' ClusterSecretStore).
CLUSTER_SCOPED_KINDS = frozenset({
    "CustomResourceDefinition", "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding", "PriorityClass", "StorageClass", "VolumeAttachment", "CSIDriver", "CSINode",
    "RuntimeClass", "IngressClass", "Node", "CertificateSigningRequest", "FlowSchema", "PriorityLevelConfiguration",
    "DeviceClass", "ResourceFlavor", "Cohort", "Topology", "AdmissionCheck", "ProvisioningRequestConfig",
    "WorkloadPriorityClass", "MultiKueueConfig", "MultiKueueCluster", "ServiceCIDR", "IPAddress",
    "VolumeAttributesClass", "ResourceSlice", "ResourceClass", "DeviceTaintRule", "StorageVersionMigration",
    "StorageVersion", "PodSecurityPolicy", "ComponentStatus",
})


def _kubernetes_scope_problem(kind: str, props: Any, namespace: str) -> str | None:
    """Why a team stack's Kubernetes object reaches beyond the team's namespace, or None. A patch
    (NamespacePatch, ...) is judged as the object it changes."""
    patch = kind.endswith("Patch")
    kind = kind.removesuffix("Patch")
    metadata = get(props, "metadata") or {}
    if kind == "PersistentVolume" and patch:
        return "patches a persistent volume: a team's volumes are the ones its stack creates, bound to its claims"
    if kind == "PersistentVolume":
        claim_namespace = get(get(get(props, "spec") or {}, "claimRef") or {}, "namespace")
        return None if claim_namespace == namespace else (
            f"is a cluster-scoped volume bound to namespace {claim_namespace}, not {namespace} (spec.claimRef)")
    if kind in TEAM_CLUSTER_SCOPED_KINDS:
        name = get(metadata, "name")
        allowed = [namespace]
        if name not in allowed:
            return f"is a cluster-scoped {kind} named {name}, not {' or '.join(allowed)}"
        enforce = get(get(metadata, "labels") or {}, POD_SECURITY_ENFORCE) if kind == "Namespace" else None
        if kind == "Namespace" and enforce not in TEAM_POD_SECURITY_LEVELS and not (patch and enforce is None):
            return (f"enforces the pod security level {enforce} ({POD_SECURITY_ENFORCE}), not one of "
                    f"{', '.join(TEAM_POD_SECURITY_LEVELS)}: a privileged pod takes its node")
        return None
    if kind == "ClusterQueue":
        return ("is a ClusterQueue: the platform stack makes the team's, with its quota, from its registry of teams "
                "(gpu-training:teams, components/workload/team_queues.py); a team stack makes only its LocalQueues")
    if kind in CLUSTER_SCOPED_KINDS or kind.startswith("Cluster"):
        return f"is a cluster-scoped {kind}: it acts on the whole cluster"
    object_namespace = get(metadata, "namespace")
    if object_namespace is None:
        return f"is a {kind} without a namespace: cluster-scoped, or placed in the provider's default namespace"
    if object_namespace != namespace:
        return f"lives in namespace {object_namespace}"
    if kind == "LocalQueue" and not patch:
        target = get(get(props, "spec") or {}, "clusterQueue")
        queues = [namespace + suffix for suffix in TEAM_CLUSTER_QUEUE_SUFFIXES]
        if target not in queues:
            return f"is a LocalQueue onto ClusterQueue {target}, not the team's own ({' or '.join(queues)})"
    if kind == "RoleBinding" and not patch:
        return _team_role_binding_problem(props, namespace)
    return None


def _plain(value: Any) -> Any:
    """A property as plain dicts and lists (the engine hands the pack proxies of them)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return [_plain(item) for item in value] if is_list(value) else value


# The role bindings a team namespace holds: its own Roles to its own service accounts or to its
# members group (the team's people: components/workload/team_members.py), and on a MultiKueue
# worker the dispatcher's group to its ClusterRole (components/workload/multikueue.py
# dispatcher_role_binding). Any other ClusterRole (admin, edit) or subject (another namespace's
# accounts, another team's people, system:authenticated) would hand the namespace, its synced
# secrets included, to others.
DISPATCHER_GROUP = "multikueue-manager"


def _team_role_binding_problem(props: Any, namespace: str) -> str | None:
    role_ref = _plain(get(props, "roleRef") or {})
    subjects = _plain(get(props, "subjects") or [])
    if get(role_ref, "kind") == "ClusterRole" and get(role_ref, "name") == DISPATCHER_GROUP:
        if subjects == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": DISPATCHER_GROUP}]:
            return None
        return f"binds ClusterRole {DISPATCHER_GROUP} to {subjects}, not to the dispatcher's group alone"
    if get(role_ref, "kind") != "Role":
        return f"binds {get(role_ref, 'kind')} {get(role_ref, 'name')}: a team binds only its namespace's own Roles"
    members = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": f"{namespace}-members"}
    strangers = [s for s in subjects if s != members and not (
        isinstance(s, dict) and get(s, "kind") == "ServiceAccount" and get(s, "namespace") == namespace)]
    if strangers:
        return (f"binds Role {get(role_ref, 'name')} to {strangers}: a team binds only its namespace's service accounts "
                f"and its members group {members['name']}")
    return None


def _team_words(stack: Stack) -> str:
    return re.escape(f"{stack.project}-{stack.environment}-{stack.team}-")


# Names a team's CloudWatch objects take, exactly (PutDashboard and PutMetricAlarm replace the
# object of that name: a prefix would let team `gpu` take the platform's `<project>-<env>-gpu-idle`,
# team `vision` take `vision-x`'s): its dashboards `<project>-<env>-<team>-<one word>`
# (components/observability/team_watch.py), its alarms `<project>-<env>-<team>-team-<team>-...`.
TEAM_NAMED: dict[str, tuple[str, Any]] = {
    "aws:cloudwatch/dashboard:Dashboard": ("dashboardName", lambda stack: re.compile(_team_words(stack) + "[a-z0-9]+")),
    "aws:cloudwatch/metricAlarm:MetricAlarm": ("name", lambda stack: re.compile(
        _team_words(stack) + re.escape(f"team-{stack.team}-") + ".+")),
}


@resource_rule(Severity.HIGH)
def team_stack_scope(args: ResourceValidationArgs, report: Report) -> None:
    """Team stacks create no shared infrastructure (VPC, cluster, node group, bucket, ...), give their people only View of and
    the members group in their own namespace, bind roles only into their own namespace, put every Kubernetes object there, and
    name their dashboards and alarms in the team's own form exactly (never the platform's or a longer team's name)."""
    stack = stack_of(args.urn, args.provider)
    if not stack.is_team:
        return
    what = describe(args.name, args.resource_type)
    shared = PLATFORM_ONLY_TYPES.get(args.resource_type) or (
        "S3 settings" if args.resource_type.startswith(S3_PACKAGES) and args.resource_type not in S3_OBJECTS else None)
    if shared:
        report(f"team stack {stack.name} creates {shared}: {what}. Shared infrastructure belongs to the "
               f"{stack.environment} platform stack; a team stack creates only team-scoped things.")
    elif args.resource_type in S3_OBJECTS:
        key = get(args.props, "key")
        if not (isinstance(key, str) and key.startswith(stack.team_object_prefix)):
            report(f"{what} writes the object {key} outside {stack.team_object_prefix}; a team's objects live under "
                   "its own prefix of the shared buckets.")
    elif args.resource_type in CLUSTER_ACCESS:
        # An access entry with an access policy makes any principal a cluster user, cluster-admin
        # included; a team's people get View and the members group in its namespace only.
        for problem in CLUSTER_ACCESS[args.resource_type](args.props, stack):
            report(f"{what} {problem}; team {stack.team}'s people reach only namespace {stack.team_namespace} "
                   "(components/workload/team_members.py).")
    elif args.resource_type == POD_IDENTITY:
        namespace = get(args.props, "namespace")
        if namespace != stack.team_namespace:
            report(f"{what} binds a role into namespace {namespace}; team {stack.team} owns only {stack.team_namespace}.")
    elif args.resource_type in TEAM_NAMED:
        field, form = TEAM_NAMED[args.resource_type]
        name = known(args.props, field)
        if isinstance(name, str) and not form(stack).fullmatch(name):
            report(f"{what} is named {name}, not {form(stack).pattern.replace(chr(92), '')}: CloudWatch overwrites "
                   "an alarm or dashboard of the same name, the platform's or another team's.")
    elif package_of(args.resource_type) == "kubernetes" and not args.resource_type.startswith(NON_OBJECT_KUBERNETES_TYPES):
        problem = _kubernetes_scope_problem(args.resource_type.rsplit(":", 1)[-1], args.props, stack.team_namespace)
        if problem:
            report(f"{what} {problem}; team {stack.team} owns only namespace {stack.team_namespace}.")


# --- team-iam-scope ---------------------------------------------------------------------------

# Resource-based policies a team stack may write: each applies to its own resource only.
RESOURCE_POLICY_FIELDS = {
    "aws:s3/bucketPolicy:BucketPolicy": "policy",
    "aws:kms/key:Key": "policy",
    "aws:secretsmanager/secret:Secret": "policy",
    "aws:secretsmanager/secretPolicy:SecretPolicy": "policy",
}
IAM_DOCUMENT_FIELDS = {
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:iam/policy:Policy": "policy",
    "aws:iam/groupPolicy:GroupPolicy": "policy",
    "aws:iam/userPolicy:UserPolicy": "policy",
}
ROLE = "aws:iam/role:Role"
# Every way pulumi-aws attaches a managed policy, and the input that names it (or them). None of
# them is scoped to a team: AWS managed policies reach every bucket and secret of the account.
MANAGED_POLICY_ATTACHMENTS = {
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "policyArn",
    "aws:iam/groupPolicyAttachment:GroupPolicyAttachment": "policyArn",
    "aws:iam/userPolicyAttachment:UserPolicyAttachment": "policyArn",
    "aws:iam/policyAttachment:PolicyAttachment": "policyArn",
    "aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive": "policyArns",
    "aws:iam/groupPolicyAttachmentsExclusive:GroupPolicyAttachmentsExclusive": "policyArns",
    "aws:iam/userPolicyAttachmentsExclusive:UserPolicyAttachmentsExclusive": "policyArns",
    ROLE: "managedPolicyArns",
}
# Services whose permissions administer identity or the account: never a team's.
ADMIN_SERVICES = ("iam", "sts", "organizations", "account")


def _allow_problems(statement: Mapping[str, Any]) -> list[str]:
    """Why an Allow statement of a team role is too wide whatever it names (what it reaches is
    evaluated per document: _outside_problems)."""
    actions = [str(a) for a in as_list(statement.get("Action"))]
    resources = [str(r) for r in as_list(statement.get("Resource"))]
    problems = []
    for action in actions:
        service, _, verb = action.lower().partition(":")
        if action == "*" or verb == "*":
            problems.append(f"grants every action of {service if verb else 'every service'} ({action})")
        elif service in ADMIN_SERVICES:
            problems.append(f"grants {action}, which administers identity")
    if "*" in resources or statement.get("NotResource") is not None:
        problems.append("applies to every resource (Resource \"*\" or NotResource)")
    return problems


def _outside_problems(document: Any, stack: Stack, shared: list[str], *, attached: bool) -> list[str]:
    """What a document allows outside the team's tenancy, asked of the IAM evaluator (reach.py says
    what the tenancy is). `attached`: a key's, secret's or bucket's own policy, whose `*` is that
    resource."""
    parsed = plain(json_document(document))
    if not isinstance(parsed, Mapping):
        return []
    found = allows_outside(parsed, outside_of(stack, shared), generic_of(stack), CONTEXT, star_is_self=attached)
    return [f"allows {action} on {arn}, outside team {stack.team}'s tenancy" for action, arn in found]


POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
# The session tag EKS Pod Identity sets to the pod's namespace (EKS User Guide, "Pod Identity").
NAMESPACE_TAG = "aws:RequestTag/kubernetes-namespace"


def _pod_trust_problem(document: Any, stack: Stack) -> str | None:
    """Whether a team role's trust lets Pod Identity hand it to a pod of another namespace (another
    team's): the evaluator asks sts:AssumeRole with that namespace's session tag."""
    parsed = plain(json_document(document))
    if not isinstance(parsed, Mapping):
        return None
    def by_pods(statement: Mapping[str, Any]) -> bool:
        principal = statement.get("Principal")
        return isinstance(principal, Mapping) and POD_IDENTITY_SERVICE in [str(p) for p in as_list(principal.get("Service"))]
    pods = [s for s in statements(parsed) if by_pods(s) or s.get("Effect") == "Deny"]
    # The namespaces to ask about: one no document names, and every one the document names (its
    # wildcards filled), but the team's own.
    named = [str(v).replace("*", "x").replace("?", "x") for s in pods for block in (s.get("Condition") or {}).values()
             if isinstance(block, Mapping) for key, values in block.items() if str(key).lower() == NAMESPACE_TAG.lower()
             for v in as_list(values)]
    for namespace in dict.fromkeys([f"team-{OTHER_TEAM}", *named]):
        if namespace == stack.team_namespace:
            continue
        for action in ("sts:AssumeRole", "sts:TagSession"):
            if evaluate({"Statement": pods}, action, "*", {NAMESPACE_TAG: namespace}) == "Allow":
                return f"lets Pod Identity give it to pods of another namespace ({NAMESPACE_TAG} {namespace})"
    return None


# The settings a stack's policy configuration may give team-iam-scope.
TEAM_IAM_SCOPE_SETTINGS = PolicyConfigSchema(properties={
    "sharedReadBuckets": {"type": "array", "items": {"type": "string"},
                          "description": "Buckets every team may read besides its environment's datasets bucket: "
                                         "an existing one the platform reads (storage.datasetsBucket)."},
})


@resource_rule(Severity.HIGH, config_schema=TEAM_IAM_SCOPE_SETTINGS)
def team_iam_scope(args: ResourceValidationArgs, report: Report) -> None:
    """In team stacks, IAM reaches only the team's tenancy, as an IAM evaluator answers it for identity and resource policies:
    no wildcards or identity administration, objects only under teams/<team>/ of the environment's buckets (its datasets
    read-only), secrets only under <project>/<env>/teams/<team>/, role names <project>-<env>-team-<team>-<one word>."""
    stack = stack_of(args.urn, args.provider)
    if not stack.is_team or package_of(args.resource_type) != "aws":
        return
    what = describe(args.name, args.resource_type)
    documents = [get(args.props, field)] if (field := IAM_DOCUMENT_FIELDS.get(args.resource_type)) else []
    if args.resource_type == ROLE:  # a role's inline_policies are policies of their own, as RolePolicy's
        documents += [get(inline, "policy") for inline in as_list(get(args.props, "inlinePolicies"))]
    scope = (f"A team's roles reach only its own prefixes ({stack.team_object_prefix}, {stack.team_secret_prefix}), "
             f"roles ({stack.team_name_prefix}<word>) and shared data read-only.")
    for document in documents:
        for statement in statements(json_document(document)):
            if statement.get("Effect") == "Allow":
                for problem in _allow_problems(statement):
                    report(f"{what} {problem}. {scope}")
    attached_documents = [get(args.props, field)] if (field := RESOURCE_POLICY_FIELDS.get(args.resource_type)) else []
    shared = [str(b) for b in as_list((args.get_config() or {}).get("sharedReadBuckets"))]
    for document, attached in [*((d, False) for d in documents), *((d, True) for d in attached_documents)]:
        for problem in _outside_problems(document, stack, shared, attached=attached):
            report(f"{what} {problem}. {scope}")
    attached = as_list(get(args.props, arn_field)) if (arn_field := MANAGED_POLICY_ATTACHMENTS.get(args.resource_type)) else []
    if attached:
        report(f"{what} attaches managed policies ({', '.join(map(str, attached))}), which are not scoped to the team. "
               "Write the permissions inline (aws.iam.RolePolicy).")
    if args.resource_type == ROLE:
        name = get(args.props, "name")
        if isinstance(name, str) and name.startswith(f"{stack.project}-") and not owns_role_name(stack, name):
            report(f"{what} takes the name {name} in the project's namespace; a team's role names are "
                   f"{stack.team_name_prefix}<one word> (with a hyphen, a longer team's).")
        for statement in statements(json_document(get(args.props, "assumeRolePolicy"))):
            principal = statement.get("Principal")
            aws_principals = ([str(p) for p in as_list(principal.get("AWS"))] if isinstance(principal, Mapping)
                              else [str(principal)])
            if statement.get("Effect") == "Allow" and any(p == "*" or p.endswith(":root") for p in aws_principals):
                report(f"{what} trusts {', '.join(aws_principals)}: any principal of the account could assume it. "
                       "Trust the Pod Identity service or one named role.")
        if problem := _pod_trust_problem(get(args.props, "assumeRolePolicy"), stack):
            report(f"{what} {problem}. Trust Pod Identity for the team's namespace {stack.team_namespace} only.")
    if args.resource_type == "aws:secretsmanager/secret:Secret":
        name = get(args.props, "name")
        if isinstance(name, str) and not name.startswith(stack.team_secret_prefix):
            report(f"{what} is named {name}; a team's secrets live under {stack.team_secret_prefix}.")


# --- allowed-resource-types ------------------------------------------------------------------

@resource_rule(Severity.HIGH)
def allowed_resource_types(args: ResourceValidationArgs, report: Report) -> None:
    """Each stack kind (platform, team, bootstrap) creates only the resource types its allow-list names
    (policy/gpu_training_policy/allowed_types.py); aws-native, command, dynamic providers and any unlisted package are
    refused."""
    stack = stack_of(args.urn, args.provider)
    if allowed_entry(args.resource_type, stack.kind) is not None:
        return
    elsewhere = sorted({k for e in ALLOWED_TYPES for k in e.kinds.split() if allowed_entry(args.resource_type, k)})
    why = (f"it is allowed only in {', '.join(elsewhere)} stacks" if elsewhere else
           f"the package {package_of(args.resource_type)} or this type is not in the allow-list")
    report(f"{describe(args.name, args.resource_type)} may not be created by the {stack.kind} stack {stack.name}: "
           f"{why}. Add a line to policy/gpu_training_policy/allowed_types.py (with its reason) if it belongs there.")


# --- no-prod-data-outside-prod ----------------------------------------------------------------

# A name with a whole `prod`/`production` part marks production data: the same rule as the
# config model's names_prod_data (components/config/storage.py).
PROD_WORDS = ("prod", "production")
S3_REFERENCE = re.compile(r"(?:arn:aws[a-z-]*:s3:::|s3://)(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])")
KMS_ALIAS = re.compile(r"alias/(?P<alias>[A-Za-z0-9/_-]+)")
BUCKET_FIELDS = ("bucket", "bucketName", "targetBucket")
STACK_REFERENCE = "pulumi:pulumi:StackReference"
AWS_PROVIDER = "pulumi:providers:aws"


def names_prod(name: str) -> bool:
    return any(part in PROD_WORDS for part in re.split(r"[-./_]", name.lower()))


def _prod_references(props: Mapping[str, Any], project: str) -> list[str]:
    """Prod buckets, key aliases and secrets an input names, outside IAM Deny statements."""
    found = []
    # Reading a document not known yet (a preview) stops the check: the engine notes that it
    # could not run, rather than passing what it could not read.
    documents = {key: document for key in ("policy", "assumeRolePolicy")
                 if has(props, key) and (document := json_document(get(props, key))) is not None}
    for path, text in strings(props):
        top = path.split(".")[0].split("[")[0]
        if top in documents:
            continue
        leaf = path.rsplit(".", 1)[-1]
        if leaf in BUCKET_FIELDS and names_prod(text):
            found.append(f"bucket {text} ({path})")
        found += [f"bucket {m['bucket']} ({path})" for m in S3_REFERENCE.finditer(text) if names_prod(m["bucket"])]
        found += [f"key alias/{m['alias']} ({path})" for m in KMS_ALIAS.finditer(text) if names_prod(m["alias"])]
        if f"{project}/prod/" in text:
            found.append(f"a prod secret ({path})")
    for key, document in sorted(documents.items()):
        for statement in statements(document):
            if statement.get("Effect") == "Allow":
                granted = _prod_references({"Resource": statement.get("Resource")}, project)
                found += [f"{what} in an Allow of {key}" for what in granted]
    return found


@resource_rule(Severity.CRITICAL)
def no_prod_data_outside_prod(args: ResourceValidationArgs, report: Report) -> None:
    """Non-prod stacks never reference a prod bucket, key alias or secret."""
    stack = stack_of(args.urn, args.provider)
    if stack.is_prod or stack.environment is None:
        return
    for reference in _prod_references(args.props, stack.project):
        report(f"{describe(args.name, args.resource_type)} in the {stack.environment} stack {stack.name} references "
               f"{reference}. Non-prod stacks never touch prod data.")


# A stack policy: the engine analyses a StackReference (a read, not a registration) only with the whole stack.
@stack_rule(Severity.CRITICAL)
def no_prod_stack_reference(args: StackValidationArgs, report: Report) -> None:
    """Non-prod stacks never read a prod stack's outputs (its bucket names and key ARNs)."""
    resources = list(args.resources)
    aws = next((r.provider for r in resources if r.provider and r.provider.resource_type == AWS_PROVIDER), None)
    stack = stack_of(resources[0].urn, aws) if resources else None
    if stack is None or stack.is_prod or stack.environment is None:
        return
    for resource in resources:
        if resource.resource_type != STACK_REFERENCE:
            continue
        referenced = str(get(resource.props, "name", ""))
        if stack_kind(referenced.rsplit("/", 1)[-1])[1] == "prod":
            report(f"{describe(resource.name, resource.resource_type)} in the {stack.environment} stack {stack.name} "
                   f"reads the prod stack {referenced}, whose outputs are prod buckets and keys. Reference the "
                   f"{stack.environment} platform stack.", resource.urn)


POLICIES = (allowed_resource_types, cost_tags, explicit_provider, team_stack_scope, team_iam_scope, no_prod_data_outside_prod,
            no_prod_stack_reference)
