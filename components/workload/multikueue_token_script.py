"""Writes, for each MultiKueue worker, a kubeconfig Secret holding a short-lived EKS token.

Run every few minutes by a CronJob on the manager cluster, as the manager's dispatcher role (EKS
Pod Identity: no key anywhere). Standard library only (the trainer image's Python runs it):

- credentials: the Pod Identity agent's endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI, with the
  token in AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE), as the SDKs read it
  (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html);
- the worker's endpoint and CA: EKS DescribeCluster, signed with SigV4;
- the token: `k8s-aws-v1.` + base64url of an STS GetCallerIdentity URL presigned with the header
  `x-k8s-aws-id: <cluster>`, what `aws eks get-token` prints; EKS accepts it for 15 minutes
  (kubernetes-sigs/aws-iam-authenticator README, "API Authorization from Outside a Cluster");
- the Secret `<worker>-kubeconfig` in kueue-system, key `kubeconfig` (kueue v0.19.2
  multikueue_types.go MultiKueueConfigSecretKey), which Kueue watches and reconnects on change.
  Pulumi creates the Secret, empty; this script only patches its data (a JSON merge patch, which
  never creates: its Role has get/update/patch on those names alone).

Kueue refuses exec plugins and token files in a Secret's kubeconfig (kueue v0.19.2
pkg/controller/admissionchecks/multikueue/multikueuecluster.go validateKubeconfig), so the token
itself is written, and replaced before it expires.

Arguments: a JSON list of {"name", "cluster", "region", "dnsSuffix"} (one per worker) in WORKERS;
dnsSuffix is the partition's (aws.get_partition: amazonaws.com, amazonaws.com.cn in China), the
EKS and STS hosts being `<service>.<region>.<dnsSuffix>`.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import os
import ssl
import sys
import urllib.parse
import urllib.request

NAMESPACE = "kueue-system"
API = "https://kubernetes.default.svc"
API_TOKEN = "/var/run/secrets/api/token"
API_CA = "/var/run/secrets/api/ca.crt"
# aws eks get-token presigns for 60 s; EKS itself accepts the token for 15 minutes from signing.
PRESIGN_SECONDS = 60


def _sign(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(secret_key: str, day: str, region: str, service: str) -> bytes:
    key = _sign(("AWS4" + secret_key).encode(), day)
    return _sign(_sign(_sign(key, region), service), "aws4_request")


def canonical_query(params: dict[str, str]) -> str:
    return "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                    for k, v in sorted(params.items()))


def service_host(service: str, region: str, dns_suffix: str) -> str:
    """A regional endpoint of the partition: sts.us-west-2.amazonaws.com, eks.cn-north-1.amazonaws.com.cn."""
    return f"{service}.{region}.{dns_suffix}"


def presigned_token(credentials: dict[str, str], *, cluster: str, region: str, dns_suffix: str,
                    now: datetime.datetime) -> str:
    """The EKS bearer token for `cluster`: a presigned sts:GetCallerIdentity URL (SigV4 query signing,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html)."""
    host = service_host("sts", region, dns_suffix)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = f"{day}/{region}/sts/aws4_request"
    params = {"Action": "GetCallerIdentity", "Version": "2011-06-15", "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
              "X-Amz-Credential": f"{credentials['AccessKeyId']}/{scope}", "X-Amz-Date": stamp,
              "X-Amz-Expires": str(PRESIGN_SECONDS), "X-Amz-SignedHeaders": "host;x-k8s-aws-id"}
    if credentials.get("Token"):
        params["X-Amz-Security-Token"] = credentials["Token"]
    query = canonical_query(params)
    request = "\n".join(["GET", "/", query, f"host:{host}", f"x-k8s-aws-id:{cluster}", "", "host;x-k8s-aws-id",
                         hashlib.sha256(b"").hexdigest()])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(request.encode()).hexdigest()])
    signature = hmac.new(signing_key(credentials["SecretAccessKey"], day, region, "sts"), to_sign.encode(),
                         hashlib.sha256).hexdigest()
    url = f"https://{host}/?{query}&X-Amz-Signature={signature}"
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def signed_get(credentials: dict[str, str], *, service: str, region: str, host: str, path: str,
               now: datetime.datetime) -> dict:
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = f"{day}/{region}/{service}/aws4_request"
    headers = {"host": host, "x-amz-date": stamp}
    if credentials.get("Token"):
        headers["x-amz-security-token"] = credentials["Token"]
    names = ";".join(sorted(headers))
    request = "\n".join(["GET", path, "", *(f"{k}:{headers[k]}" for k in sorted(headers)), "", names,
                         hashlib.sha256(b"").hexdigest()])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(request.encode()).hexdigest()])
    signature = hmac.new(signing_key(credentials["SecretAccessKey"], day, region, service), to_sign.encode(),
                         hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={credentials['AccessKeyId']}/{scope}, "
                                f"SignedHeaders={names}, Signature={signature}")
    with urllib.request.urlopen(urllib.request.Request(f"https://{host}{path}", headers=headers), timeout=30) as reply:
        return json.load(reply)


def kubeconfig(*, name: str, endpoint: str, ca_data: str, token: str) -> str:
    """Only what Kueue's validation accepts: CA data inline, a server, a bearer token."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    })


def pod_identity_credentials() -> dict[str, str]:
    with open(os.environ["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"]) as file:
        authorization = file.read().strip()
    request = urllib.request.Request(os.environ["AWS_CONTAINER_CREDENTIALS_FULL_URI"],
                                     headers={"Authorization": authorization})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.load(reply)


def secret_patch(config: str) -> bytes:
    """The merge patch: the kubeconfig (base64, as Secret data is) and nothing else of the Secret."""
    return json.dumps({"data": {"kubeconfig": base64.b64encode(config.encode()).decode()}}).encode()


def write_secret(name: str, config: str) -> None:
    with open(API_TOKEN) as file:
        token = file.read().strip()
    body = secret_patch(config)
    # A JSON merge patch of the Secret Pulumi created: replaces its data, never creates (404 if missing).
    url = f"{API}/api/v1/namespaces/{NAMESPACE}/secrets/{name}?fieldManager=multikueue-token-rotation"
    request = urllib.request.Request(url, data=body, method="PATCH", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"})
    urllib.request.urlopen(request, context=ssl.create_default_context(cafile=API_CA), timeout=30).close()


def main() -> int:
    workers = json.loads(os.environ["WORKERS"])
    credentials = pod_identity_credentials()
    failed = 0
    for worker in workers:
        now = datetime.datetime.now(datetime.UTC)
        try:
            cluster = signed_get(credentials, service="eks", region=worker["region"],
                                 host=service_host("eks", worker["region"], worker["dnsSuffix"]),
                                 path=f"/clusters/{worker['cluster']}", now=now)["cluster"]
            token = presigned_token(credentials, cluster=worker["cluster"], region=worker["region"],
                                    dns_suffix=worker["dnsSuffix"], now=now)
            write_secret(f"{worker['name']}-kubeconfig", kubeconfig(
                name=worker["name"], endpoint=cluster["endpoint"],
                ca_data=cluster["certificateAuthority"]["data"], token=token))
            # One JSON line per renewal: a metric filter counts them, and an alarm fires on a
            # worker without one for a token's lifetime (components/workload/multikueue.py).
            print(json.dumps({"event": "kubeconfig_renewed", "worker": worker["name"], "cluster": worker["cluster"],
                              "region": worker["region"]}), flush=True)
        except (OSError, KeyError, ValueError) as error:  # one worker's failure must not stop the others
            failed += 1
            print(f"{worker['name']}: not renewed: {type(error).__name__}: {error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
