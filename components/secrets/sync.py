"""External Secrets Operator: Secrets Manager -> the Kubernetes Secret `training-secrets`.

Flow: `pulumi config set --secret` -> Secrets Manager (store.py) -> this operator ->
Secret `training-secrets` in the training namespace (one key per secret name) -> env vars of
the trainer (`secretKeyRef`, training_data.secret_env).

Authentication: EKS Pod Identity on the operator's own service account, to the `secrets-sync`
role, which can read exactly this environment's secrets (identity/workload_roles.py). Why not a
per-namespace service account in the SecretStore (`auth.jwt.serviceAccountRef`): that path is
IRSA-only (AssumeRoleWithWebIdentity on an OIDC token); Pod Identity hands credentials only to
the pod's own service account. One cluster serves one environment, so the operator's role is
already scoped to the environment. What keeps other namespaces from using it:
- the store is a namespaced SecretStore; ClusterSecretStore, ClusterExternalSecret and
  PushSecret processing are switched off, so no cluster-wide object can fan secrets out or
  write back to AWS;
- the chart's aggregation to the `edit` and `admin` ClusterRoles is off, so neither namespace
  editors nor namespace admins can create SecretStores or ExternalSecrets: only the cluster
  admins (this program) do.
Team namespaces (team stacks) will need their own role assumed through the store's `role`
field; see the README.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.common.helm import helm_release
from components.common.namespaces import controller_network_policies
from components.common.namespaces import namespace as pod_security_namespace
from components.data import training_data
from components.identity.workload_roles import SECRETS_SYNC_NAMESPACE, SECRETS_SYNC_SERVICE_ACCOUNT

# external-secrets tag helm-chart-2.9.0 (cc5bfbc2, 2026-08-08; the app tag v2.9.0 still carries Chart.yaml
# 2.8.0); charts.external-secrets.io index.yaml lists 2.9.0, image ghcr.io/external-secrets/external-secrets:v2.9.0.
# Must match the CRD schemas in /work/shared/schemas/crds (external-secrets v2.9.0).
ESO_CHART_VERSION = "2.9.0"
ESO_CHART_REPOSITORY = "https://charts.external-secrets.io"
ESO_API_VERSION = "external-secrets.io/v1"
SECRET_STORE_NAME = "aws-secrets-manager"
# How often the operator re-reads Secrets Manager: a rotated token reaches new pods within this.
REFRESH_INTERVAL = "1h"
# The chart's admission webhook listens here (the API server calls it).
WEBHOOK_PORT = 10250
_COMPONENT_RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}


def chart_values() -> dict:
    return {
        "installCRDs": True,
        "serviceAccount": {"create": True, "name": SECRETS_SYNC_SERVICE_ACCOUNT},
        "processClusterStore": False,
        "processClusterExternalSecret": False,
        "processPushSecret": False,
        # The chart aggregates its `-edit` role (create SecretStores and ExternalSecrets) into both
        # `edit` and `admin` by default (templates/rbac.yaml, values rbac.aggregateTo*: true in
        # 2.9.0): a namespace admin could then point a store at the operator's role.
        "rbac": {"aggregateToEdit": False, "aggregateToAdmin": False},
        "resources": _COMPONENT_RESOURCES,
        "webhook": {"resources": _COMPONENT_RESOURCES},
        "certController": {"resources": _COMPONENT_RESOURCES},
    }


@dataclass(frozen=True)
class SecretsSyncArgs:
    cluster_name: pulumi.Input[str]
    """The cluster of the operator's Pod Identity association."""
    region: str
    """The region of the Secrets Manager the secret store reads."""
    namespace: pulumi.Input[str]
    """The training namespace that receives `training-secrets`."""
    remote_keys: dict[str, str]
    """Secret name (the Kubernetes Secret key) -> its Secrets Manager name."""
    role_arn: pulumi.Input[str] | None = None
    """Given (platform stacks): install the operator with this role. Team stacks leave it out and
    only add their namespace's store."""
    depends_on: Sequence[pulumi.Resource] = ()
    """E.g. the Pod Identity agent and the node groups the operator runs on."""
    assume_role_arn: pulumi.Input[str] | None = None
    """A team's reader role, which the operator assumes for this namespace's store only."""


class SecretsSync(pulumi.ComponentResource):
    release: k8s.helm.v3.Release | None
    secret_store: k8s.apiextensions.CustomResource
    external_secret: k8s.apiextensions.CustomResource | None

    def __init__(self, name: str, args: SecretsSyncArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:secrets:SecretsSync", name, None, opts)
        self.release = self._create_operator(name, args) if args.role_arn is not None else None
        store_spec: dict = {"service": "SecretsManager", "region": args.region}
        if args.assume_role_arn is not None:
            store_spec["role"] = args.assume_role_arn
        self.secret_store = k8s.apiextensions.CustomResource(
            f"{name}-store",
            api_version=ESO_API_VERSION,
            kind="SecretStore",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=SECRET_STORE_NAME, namespace=args.namespace),
            # No `auth`: the operator's Pod Identity credentials (the secrets-sync role), or the
            # team role it assumes with them.
            spec={"provider": {"aws": store_spec}},
            # The CRDs come with the chart.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release] if self.release else list(args.depends_on)),
        )
        self.external_secret = None
        if args.remote_keys:
            self.external_secret = k8s.apiextensions.CustomResource(
                f"{name}-training-secrets",
                api_version=ESO_API_VERSION,
                kind="ExternalSecret",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=training_data.SECRET_NAME, namespace=args.namespace),
                spec={
                    "refreshInterval": REFRESH_INTERVAL,
                    "secretStoreRef": {"name": SECRET_STORE_NAME, "kind": "SecretStore"},
                    "target": {"name": training_data.SECRET_NAME, "creationPolicy": "Owner"},
                    "data": [{"secretKey": key, "remoteRef": {"key": remote}}
                             for key, remote in sorted(args.remote_keys.items())],
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.secret_store]),
            )
        self.register_outputs({})

    def _create_operator(self, name: str, args: SecretsSyncArgs) -> k8s.helm.v3.Release:
        namespace = pod_security_namespace(f"{name}-namespace", SECRETS_SYNC_NAMESPACE, enforce="restricted",
                                           opts=pulumi.ResourceOptions(parent=self))
        self._create_network_policies(name, namespace)
        # Pod Identity injects credentials when a pod is admitted: the association must exist
        # before the operator's pods start, or they run without credentials until restarted.
        association = aws.eks.PodIdentityAssociation(
            f"{name}-operator",
            cluster_name=args.cluster_name,
            namespace=SECRETS_SYNC_NAMESPACE,
            service_account=SECRETS_SYNC_SERVICE_ACCOUNT,
            role_arn=args.role_arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
        )
        return helm_release(
            f"{name}-operator", chart="external-secrets", version=ESO_CHART_VERSION, repo=ESO_CHART_REPOSITORY,
            namespace=SECRETS_SYNC_NAMESPACE, values=chart_values(),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, association, *args.depends_on]))

    def _create_network_policies(self, name: str, namespace: k8s.core.v1.Namespace) -> None:
        """The operator needs DNS, HTTPS (Kubernetes API, Secrets Manager endpoint), the Pod
        Identity agent, and the API server reaching its webhook."""
        controller_network_policies(
            name, SECRETS_SYNC_NAMESPACE, ingress_ports=(WEBHOOK_PORT,),
            ingress_pods={"match_labels": {"app.kubernetes.io/name": "external-secrets-webhook"}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]))
