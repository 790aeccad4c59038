"""scripts/verify against a fake Kubernetes API (tests/fake_kube.py) and moto's CloudWatch: the
healthy prod cluster passes every check; each broken scenario fails exactly its check, with its
diagnosis (the likely cause and the command that shows it). The stack outputs are the
ones the offline plan of prod writes, read through --outputs like a user would."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import boto3
import pytest
import verify_scenarios as sc
import yaml
from fake_kube import FakeKube, Scenario, clone, key
from moto import mock_aws
from stack_configs import ROOT

from verify.cli import main

NCCL_SAMPLES = Path(__file__).parent / "fixtures" / "nccl"
DIGEST_IMAGE = "public.ecr.aws/hpc-cloud/nccl-tests@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def prod_outputs(plan_of, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    outputs = plan_of("prod").outputs
    path = tmp_path_factory.mktemp("outputs") / "outputs.json"
    path.write_text(json.dumps(outputs))
    return outputs, path


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)


def put_gpu_utilisation(outputs: dict[str, Any], scenario: Scenario, now: float, percent: float) -> None:
    cw = boto3.client("cloudwatch", region_name=outputs["region"])
    ns = outputs["training"]["namespace"]
    for pod in sc.job_pods(scenario, ns):
        full = pod["metadata"]["name"]
        dims = [{"Name": "ClusterName", "Value": outputs["clusterName"]}, {"Name": "Namespace", "Value": ns},
                {"Name": "PodName", "Value": sc.JOB}, {"Name": "FullPodName", "Value": full}]
        cw.put_metric_data(Namespace="ContainerInsights", MetricData=[
            {"MetricName": "pod_gpu_utilization", "Dimensions": dims, "Timestamp": now - 60 * minute,
             "Value": percent, "Unit": "Percent"} for minute in range(1, 9)])


# A runner machine as docs/delivery.md tags it (prod is the stack the scenarios check).
TAGGED_RUNNER = {"environment": "prod", "project": "gpu-training"}


def start_runners(outputs: dict[str, Any], runners: list[dict[str, str]], tmp_path: Path) -> Path:
    """moto's EC2: the runners' security group with an instance per tag set; the outputs file then
    names that group's id (the plan's is a placeholder)."""
    ec2 = boto3.client("ec2", region_name=outputs["region"])
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="gpu-training-prod-ci-runner", Description="runners", VpcId=vpc)["GroupId"]
    for tags in runners:
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m6i.large", SubnetId=subnet,
                          SecurityGroupIds=[group], TagSpecifications=[{"ResourceType": "instance", "Tags": [
                              {"Key": k, "Value": v} for k, v in tags.items()]}] if tags else [])
    path = tmp_path / "outputs-with-runners.json"
    path.write_text(json.dumps({**outputs, "ciRunnerSecurityGroupId": group}))
    return path


def put_training_loss(outputs: dict[str, Any], now: float) -> None:
    """What the platform's metric filter makes of the trainer's loss lines (GpuTraining/<cluster>)."""
    cw = boto3.client("cloudwatch", region_name=outputs["region"])
    dims = [{"Name": "Namespace", "Value": outputs["training"]["namespace"]}, {"Name": "Job", "Value": sc.JOB}]
    cw.put_metric_data(Namespace=f"GpuTraining/{outputs['clusterName']}", MetricData=[
        {"MetricName": "TrainingLoss", "Dimensions": dims, "Timestamp": now - 60 * minute, "Value": 2.0 - minute / 10}
        for minute in range(1, 9)])


def run_verify(prod_outputs, scenario: Scenario, tmp_path: Path, *extra: str, gpu_percent: float = 93.0,
               now: float | None = None, runners: tuple[dict[str, str], ...] = (TAGGED_RUNNER,),
               loss_metric: bool = True) -> tuple[int, dict[str, Any], FakeKube]:
    outputs, _ = prod_outputs
    now = now or time.time()
    with FakeKube(scenario) as fake, mock_aws():
        put_gpu_utilisation(outputs, scenario, now, gpu_percent)
        if loss_metric:
            put_training_loss(outputs, now)
        outputs_file = start_runners(outputs, list(runners), tmp_path)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(fake.kubeconfig()))
        out = io.StringIO()
        with redirect_stdout(out):
            code = main(["--stack", "prod", "--outputs", str(outputs_file), "--kubeconfig", str(kubeconfig),
                         "--job", sc.JOB, "--json", *extra], now=now,
                        cloudwatch=lambda: boto3.client("cloudwatch", region_name=outputs["region"]),
                        ec2=lambda: boto3.client("ec2", region_name=outputs["region"]),
                        service_quotas=lambda: FakeServiceQuotas(ENOUGH_QUOTAS))
    return code, json.loads(out.getvalue()), fake


# prod's pools at size.max: the p5 reservation (2 x 192 vCPUs on-demand P), gpu-spot (4 x 192 G spot),
# the system pool (6 x 8 standard on-demand); an account with room for all of them.
ENOUGH_QUOTAS = {"Running On-Demand P instances": 384, "All G and VT Spot Instance Requests": 768,
                 "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances": 1152}


class FakeServiceQuotas:
    """Service Quotas' two listings (ListAWSDefaultServiceQuotas, ListServiceQuotas), one page each."""

    def __init__(self, applied: dict[str, float], defaults: dict[str, float] | None = None):
        self.pages = {"list_aws_default_service_quotas": defaults or {}, "list_service_quotas": applied}

    def get_paginator(self, operation: str):
        quotas = self.pages[operation]

        class Pages:
            def paginate(self, ServiceCode: str):  # noqa: N803 (boto3's parameter name)
                assert ServiceCode == "ec2"
                return [{"Quotas": [{"QuotaName": n, "Value": v} for n, v in quotas.items()]}]
        return Pages()


def by_status(report: dict[str, Any], status: str) -> list[str]:
    return [c["name"] for c in report["checks"] if c["status"] == status]


@pytest.fixture
def healthy(prod_outputs) -> Scenario:
    return sc.healthy(prod_outputs[0], time.time())


def test_healthy_cluster_and_job_pass_every_check(prod_outputs, healthy, tmp_path):
    code, report, fake = run_verify(prod_outputs, healthy, tmp_path)
    assert code == 0, json.dumps(report, indent=1)
    assert by_status(report, "fail") == [] and by_status(report, "skip") == [IN_POD]
    assert set(by_status(report, "pass")) == {
        "cluster.nodes", "cluster.gpu-devices", "cluster.controllers", "cluster.training-secret",
        "cluster.hugepages", "cluster.pod-ips", "cluster.lustre-client", "cluster.dashboard", "ci.runner-tags",
        "aws.ec2-vcpu-quotas",
        "multikueue.workers", "multikueue.probe",
        f"job.{sc.JOB}.admitted", f"job.{sc.JOB}.pods", f"job.{sc.JOB}.progress", f"job.{sc.JOB}.loss-metric",
        f"job.{sc.JOB}.checkpoints",
        f"job.{sc.JOB}.gpu-utilisation", f"job.{sc.JOB}.fabric"}
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["cluster.dashboard"]["summary"] == f"dashboard: {prod_outputs[0]['dashboardUrl']}"
    # 8 one-minute points in 2 or 3 five-minute periods, by the clock
    assert re.fullmatch(r"[23] TrainingLoss datapoints in the last 30 min, latest 1\.[0-9]+",
                        checks[f"job.{sc.JOB}.loss-metric"]["summary"])
    assert checks[f"job.{sc.JOB}.fabric"]["summary"] == ("2 pods: 32 of 32 EFA devices, GPUDirect RDMA on every "
                                                         "inter-node channel")
    # prod is its environment's MultiKueue manager: the probe went to its worker and was removed.
    assert checks["multikueue.probe"]["summary"] == ("a 1-GPU probe on queue any-region ran to completion on worker "
                                                     "prod-usw2 (pool gpu-spot)")
    ns = prod_outputs[0]["training"]["namespace"]
    jobsets = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
    assert len([p for p in fake.calls("DELETE") if p.startswith(f"{jobsets}/multikueue-probe-")]) == 1
    assert fake.calls("POST") == [jobsets]
    assert [j["metadata"]["name"] for j in healthy.objects[key("jobsets", ns, "jobset.x-k8s.io")]] == [sc.JOB]
    # Three DaemonSet pods and the training pod.
    assert "- ip-10-0-1-11 (p5.48xlarge): maxPods 100, 4 of 49 pod IPs in use" in [
        f"- {d}" for d in checks["cluster.pod-ips"]["details"]]


def test_what_needs_a_shell_in_the_pod_says_so_with_the_command(prod_outputs, healthy, tmp_path):
    # verify runs no command inside pods: the in-pod part of the first-node checklist is a skip
    # that names the command and what it must print (docs/gpu-fabric-and-capacity.md).
    _, report, _ = run_verify(prod_outputs, healthy, tmp_path)
    (in_pod,) = [c for c in report["checks"] if c["name"] == IN_POD]
    assert in_pod["status"] == "skip" and in_pod["summary"].startswith("needs a live pod exec")
    for words in ("exec pretrain-p5-node-0-0-x7k2p", "ulimit -l", "prints unlimited", "fi_info -p efa -t FI_EP_RDM",
                  "lists 32 domains", "lists 32 uverbs devices", "`id -u` prints 1000", "lustre /proc/filesystems"):
        assert words in in_pod["summary"], words


def _oom(s: Scenario, ns: str) -> None:
    pod = sc.job_pods(s, ns)[1]
    pod["status"]["phase"] = "Failed"
    pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}


def _flat_loss(s: Scenario, ns: str) -> None:
    rng = __import__("random").Random(3)
    s.logs[f"{ns}/{sc.job_pods(s, ns)[0]['metadata']['name']}"] = sc.trainer_log(
        time.time(), loss=lambda i: 2.3 + rng.uniform(-0.05, 0.05))


def _no_checkpoint(s: Scenario, ns: str) -> None:
    # Saves stop after the first one; training goes on for three more periods.
    s.logs[f"{ns}/{sc.job_pods(s, ns)[0]['metadata']['name']}"] = sc.trainer_log(
        time.time(), saves_until=sc.CHECKPOINT_INTERVAL_S * 1.5)


IN_POD = f"job.{sc.JOB}.in-pod"


def _fabric_log(found: tuple[int, ...] = (32,), gdr: bool | None = True) -> Any:
    """Pod 1's launcher reports what its ranks found (the launcher's fabric_status event)."""
    def breaks(s: Scenario, ns: str) -> None:
        pod = sc.job_pods(s, ns)[1]["metadata"]["name"]
        s.logs[f"{ns}/{pod}"] += sc.fabric_status(time.time() - 60, found=found, gdr=gdr)
    return breaks


def _hugepages_over_reserve(s: Scenario, ns: str) -> None:
    # The AMI reserves 10 GiB of huge pages on the spare: twice what the sizing holds back.
    spare = next(n for n in s.objects[key("nodes")] if n["metadata"]["name"] == sc.GPU_NODES[2])
    spare["status"]["allocatable"]["hugepages-2Mi"] = "10240Mi"


def _pod_ips_exhausted(s: Scenario, ns: str) -> None:
    # p5's CNI has one ENI for pods (card 0's second slot is efa-only): 49 IPs, all taken on the spare.
    s.add(key("pods", "monitoring"), *[sc._pod(f"agent-{i}", "monitoring", sc.GPU_NODES[2], {"app": "agent"})
                                       for i in range(49)])


def _max_pods_differs(s: Scenario, ns: str) -> None:
    spare = next(n for n in s.objects[key("nodes")] if n["metadata"]["name"] == sc.GPU_NODES[2])
    spare["status"]["allocatable"]["pods"] = "250"


def _lustre_client_missing(s: Scenario, ns: str) -> None:
    s.objects[key("pods", "kube-system")] = [p for p in s.objects[key("pods", "kube-system")]
                                             if p["metadata"]["name"] != f"fsx-csi-node-{sc.GPU_NODES[2][-2:]}"]


def _device_plugin_missing(s: Scenario, ns: str) -> None:
    spare = sc.GPU_NODES[2]
    s.objects[key("pods", "kube-system")] = [p for p in s.objects[key("pods", "kube-system")]
                                             if not (p["spec"]["nodeName"] == spare and "nvidia" in p["metadata"]["name"])]
    next(n for n in s.objects[key("nodes")] if n["metadata"]["name"] == spare)["status"]["allocatable"]["nvidia.com/gpu"] = "0"


def _efa_short(s: Scenario, ns: str) -> None:
    # The EFA plugin runs on the spare, but finds half the p5's 32 interfaces.
    spare = next(n for n in s.objects[key("nodes")] if n["metadata"]["name"] == sc.GPU_NODES[2])
    spare["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "16"


def _node_not_ready(s: Scenario, ns: str) -> None:
    # A second system node joined, but the VPC CNI never came up on it: nothing of ours runs there.
    s.add(key("nodes"), sc._node("ip-10-0-0-6", "system", {"cpu": "8", "memory": "30Gi"}, ready="False"))
    ready = s.objects[key("nodes")][-1]["status"]["conditions"][0]
    ready.update(reason="KubeletNotReady", message="container runtime network not ready: NetworkReady=false "
                 "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")


def _kueue_unavailable(s: Scenario, ns: str) -> None:
    # Both replicas crash: the API leaves availableReplicas out when it is 0.
    kueue = s.objects[key("deployments", "kueue-system", "apps")][0]
    kueue["status"] = {"replicas": 2, "unavailableReplicas": 2, "conditions": [
        {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]}


def _secret_not_synced(s: Scenario, ns: str) -> None:
    # The Secret is gone and the store cannot read Secrets Manager to recreate it: the running pods
    # keep their env, the next start has nothing to read.
    s.objects[key("secrets", ns)] = []
    s.objects[key("externalsecrets", ns, "external-secrets.io")][0]["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "SecretSyncedError",
         "message": "could not get secret data from provider"}]


def _not_admitted(s: Scenario, ns: str) -> None:
    # Other jobs hold the p5 quota: Kueue keeps the JobSet suspended, so it has no pods.
    workload = s.objects[key("workloads", ns, "kueue.x-k8s.io")][0]
    workload["status"] = {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending",
         "message": "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor "
                    "p5-efa, 16 more needed"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation"}]}
    s.objects[key("pods", ns)] = [p for p in s.objects[key("pods", ns)] if p not in sc.job_pods(s, ns)]


def _gang_restart_loop(s: Scenario, ns: str) -> None:
    # The gang failed twice and JobSet replaced every pod each time (restartPolicy Never): the pods
    # of the third attempt run, with no restarted container to read --previous from.
    s.objects[key("jobsets", ns, "jobset.x-k8s.io")][0]["status"] = {"restarts": 2, "restartsCountTowardsMax": 2}


def _hang_before_init(s: Scenario, ns: str) -> None:
    # Ports blocked between the nodes: the launchers started 40 min ago, the trainer never got past
    # its first collective (trainer_start comes after the barrier and the resume broadcast).
    s.logs[f"{ns}/{sc.job_pods(s, ns)[0]['metadata']['name']}"] = sc.trainer_log(time.time(), initialised=False)


def _starting(s: Scenario, ns: str) -> None:
    # The launchers started a minute ago: the rendezvous may still wait for a pod, not a hang yet.
    log = sc.trainer_log(time.time() + sc.RUN_SECONDS - 60, initialised=False)
    s.logs.update({f"{ns}/{p['metadata']['name']}": log for p in sc.job_pods(s, ns)})


def _worker_disconnected(s: Scenario, ns: str) -> None:
    # The manager's kubeconfig for one worker expired (its rotation CronJob stopped): Kueue cannot connect.
    (worker,) = [c for c in s.objects[key("multikueueclusters", group=sc.KUEUE)] if c["metadata"]["name"] == "prod-usw2"]
    worker["status"]["conditions"][0].update(status="False", reason="ClientConnectionFailed", message="Unauthorized")


def _probe_rejected(s: Scenario, ns: str) -> None:
    # The worker's any-region LocalQueue is missing: MultiKueue rejects what it dispatches.
    dispatch = s.on_create

    def reject(s: Scenario, collection: str, body: dict[str, Any]) -> None:
        if dispatch:
            dispatch(s, collection, body)
        for workload in s.objects.get(key("workloads", ns, sc.KUEUE), []):
            if workload["metadata"]["ownerReferences"][0]["name"] == body["metadata"]["name"]:
                workload["status"] = {"admissionChecks": [{"name": "multikueue", "state": "Rejected"}]}
    s.on_create = reject


BROKEN = [
    # (scenario, GPU %, the one check that must fail, words of its cause, words of its command,
    #  the checks skipped because of it: every other check passes)
    ("oom-killed-pod", _oom, 93.0, f"job.{sc.JOB}.pods", "out of memory", "kubectl -n {ns} describe pod", ()),
    ("gang-restart-loop", _gang_restart_loop, 93.0, f"job.{sc.JOB}.pods",
     "the trainer fails again after every gang restart",
     f"kubectl -n {{ns}} get events --sort-by=.lastTimestamp | grep {sc.JOB}; aws logs tail "
     f"/aws/containerinsights/{{cluster}}/application --region {{region}} --since 6h "
     f"--filter-pattern '\"{sc.JOB}\" \"launcher_exit\"'", ()),
    ("loss-not-falling", _flat_loss, 93.0, f"job.{sc.JOB}.progress", "not learning", "grep '\"event\":\"step\"'",
     ()),
    ("no-checkpoint-in-two-periods", _no_checkpoint, 93.0, f"job.{sc.JOB}.checkpoints", "shared file system",
     "ls -l \"$TRAIN_CHECKPOINT_DIR\"", ()),
    ("gpu-at-5-percent", None, 5.0, f"job.{sc.JOB}.gpu-utilisation", "data-loading bottleneck",
     "aws cloudwatch get-metric-statistics", ()),
    ("device-plugin-missing-on-a-node", _device_plugin_missing, 93.0, "cluster.gpu-devices",
     "GPU not detected: the device plugin is missing",
     f"--field-selector spec.nodeName={sc.GPU_NODES[2]}", ()),
    ("efa-interfaces-missing-on-a-node", _efa_short, 93.0, "cluster.gpu-devices",
     "EFA interfaces missing: the launch template attached fewer network cards",
     f"kubectl describe node {sc.GPU_NODES[2]}", ()),
    ("node-not-ready", _node_not_ready, 93.0, "cluster.nodes", "abnormal node state: kubelet, the VPC CNI (aws-node)",
     "kubectl describe node ip-10-0-0-6", ()),
    ("controller-unavailable", _kueue_unavailable, 93.0, "cluster.controllers",
     "Kueue 0/2 replicas available: no job is admitted",
     "kubectl -n kueue-system describe deployment kueue-controller-manager; "
     "kubectl -n kueue-system logs deployment/kueue-controller-manager", ()),
    ("training-secret-not-synced", _secret_not_synced, 93.0, "cluster.training-secret",
     "crash at start (missing config/env): the trainer's secretKeyRef has nothing to read",
     "kubectl -n {ns} describe externalsecret training-secrets", ()),
    ("job-not-admitted", _not_admitted, 93.0, f"job.{sc.JOB}.admitted",
     "waiting for quota (Pending: couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu",
     f"kubectl -n {{ns}} describe workload jobset-{sc.JOB}-3f2a1",
     tuple(f"job.{sc.JOB}.{c}" for c in ("pods", "progress", "loss-metric", "checkpoints", "gpu-utilisation", "fabric",
                                         "in-pod"))),
    # The first-node checklist (docs/gpu-fabric-and-capacity.md), what verify can read itself:
    ("efa-devices-short-in-a-pod", _fabric_log(found=(1,)), 93.0, f"job.{sc.JOB}.fabric",
     "fewer EFA devices than the type has", "exec pretrain-p5-node-0-1-m4q9z -- ls /dev/infiniband", ()),
    ("no-gpudirect-rdma", _fabric_log(gdr=False), 93.0, f"job.{sc.JOB}.fabric", "no GPUDirect RDMA",
     "logs pretrain-p5-node-0-1-m4q9z | grep -E '^nccl: |fabric_'", ()),
    ("hugepages-over-the-reserve", _hugepages_over_reserve, 93.0, "cluster.hugepages",
     "the AMI reserves more huge pages than the pod sizing holds back", f"kubectl describe node {sc.GPU_NODES[2]}", ()),
    ("pod-ips-exhausted", _pod_ips_exhausted, 93.0, "cluster.pod-ips", "no pod IP left on the node",
     "logs -l k8s-app=aws-node", ()),
    ("max-pods-differs", _max_pods_differs, 93.0, "cluster.pod-ips",
     "maxPods differs from the one the subnet IP budget", f"kubectl describe node {sc.GPU_NODES[2]}", ()),
    ("lustre-client-missing-on-a-node", _lustre_client_missing, 93.0, "cluster.lustre-client",
     "no Lustre client on the node", f"--field-selector spec.nodeName={sc.GPU_NODES[2]}", ()),
    # A hung collective keeps its kernel spinning: DCGM reports the GPUs busy, so only the logs tell.
    ("hang-ports-blocked", _hang_before_init, 93.0, f"job.{sc.JOB}.progress",
     "hang: nodes cannot talk (ports blocked by the fabric security group {cluster}-efa-fabric, which must allow all "
     "traffic between its members (EFA), or a node outside it; or the pod's ip_local_port_range is not {first}-{last}",
     f"kubectl -n {{ns}} exec {sc.JOB}-node-0-0-x7k2p -- cat /proc/sys/net/ipv4/ip_local_port_range; "
     "aws ec2 describe-security-groups --region {region} --filters Name=group-name,Values={cluster}-efa-fabric",
     # No trainer_start, so no checkpoint period to hold the run to.
     (f"job.{sc.JOB}.checkpoints",)),
    # prod dispatches its any-region jobs to prod-usw2 and prod-use2 (MultiKueue); the probe runs only once the workers
    # are connected: one disconnected worker fails the check, naming it.
    ("multikueue-worker-disconnected", _worker_disconnected, 93.0, "multikueue.workers",
     "prod-usw2: ClientConnectionFailed Unauthorized: the kubeconfig Secret is missing or expired",
     "kubectl get multikueuecluster prod-usw2 -o yaml", ()),
    ("multikueue-probe-rejected", _probe_rejected, 93.0, "multikueue.probe", "no worker admitted a one-pod job",
     "kubectl -n {ns} get workloads -o wide", ()),
    # Not broken yet: too early to call it a hang, so the diagnosis says so.
    ("trainer-still-starting", _starting, 93.0, f"job.{sc.JOB}.progress", "still starting",
     # NCCL has not set up a network yet: nothing to judge the fabric by.
     f"kubectl -n {{ns}} logs -f {sc.JOB}-node-0-0-x7k2p", (f"job.{sc.JOB}.checkpoints", f"job.{sc.JOB}.fabric")),
]


@pytest.mark.parametrize(("case", "breaks", "gpu", "check", "cause", "command", "skips"), BROKEN,
                         ids=[b[0] for b in BROKEN])
def test_each_broken_scenario_fails_exactly_its_check(prod_outputs, healthy, tmp_path, case, breaks, gpu, check,
                                                      cause, command, skips):
    outputs = prod_outputs[0]
    ns = outputs["training"]["namespace"]
    scenario = clone(healthy)
    if breaks:
        breaks(scenario, ns)
    code, report, _ = run_verify(prod_outputs, scenario, tmp_path, gpu_percent=gpu)
    assert code == 1
    assert by_status(report, "fail") == [check], json.dumps(report, indent=1)
    # The in-pod checks need a shell in the pod: always a skip that names the command.
    all_skips = [*skips, *([] if IN_POD in skips else [IN_POD])]
    assert by_status(report, "skip") == all_skips, json.dumps(report, indent=1)
    assert len(by_status(report, "pass")) == len(report["checks"]) - 1 - len(all_skips)
    diagnosis = next(c for c in report["checks"] if c["name"] == check)["diagnosis"]
    values = {"ns": ns, "cluster": outputs["clusterName"], "region": outputs["region"], **outputs["ncclPortRange"]}
    assert cause.format(**values) in diagnosis["cause"]
    assert command.format(**values) in diagnosis["command"]


@pytest.mark.parametrize(("runners", "details"), [
    # A runner launched without tags, and one of another environment's.
    (({}, TAGGED_RUNNER), ["no environment tag (wants 'prod'), no project tag (wants 'gpu-training')"]),
    (({"environment": "dev", "project": "gpu-training"},), ["environment='dev' (wants 'prod')"]),
    (({"environment": "prod"},), ["no project tag (wants 'gpu-training')"]),
])
def test_an_untagged_runner_instance_fails_exactly_the_runner_check(prod_outputs, healthy, tmp_path, runners, details):
    code, report, _ = run_verify(prod_outputs, healthy, tmp_path, runners=runners)
    assert code == 1 and by_status(report, "fail") == ["ci.runner-tags"], json.dumps(report, indent=1)
    check = next(c for c in report["checks"] if c["name"] == "ci.runner-tags")
    assert check["summary"] == f"1 of {len(runners)} runner instances lack their environment/project tags"
    assert [d.split(": ", 1)[1] for d in check["details"]] == details
    assert "ssm:SendCommand" in check["diagnosis"]["cause"]
    assert check["diagnosis"]["command"].startswith("aws ec2 create-tags --region us-east-1 --resources i-")
    assert check["diagnosis"]["command"].endswith("--tags Key=environment,Value=prod Key=project,Value=gpu-training")


def test_no_runner_instance_in_sight_is_a_skip_that_says_why(prod_outputs, healthy, tmp_path):
    code, report, _ = run_verify(prod_outputs, healthy, tmp_path, runners=())
    assert code == 0 and "ci.runner-tags" in by_status(report, "skip")
    check = next(c for c in report["checks"] if c["name"] == "ci.runner-tags")
    assert check["summary"].startswith("no instance in the runners' security group sg-")


def test_a_job_whose_loss_never_reaches_cloudwatch_fails_only_that_check(prod_outputs, healthy, tmp_path):
    outputs = prod_outputs[0]
    code, report, _ = run_verify(prod_outputs, healthy, tmp_path, loss_metric=False)
    assert code == 1 and by_status(report, "fail") == [f"job.{sc.JOB}.loss-metric"], json.dumps(report, indent=1)
    diagnosis = next(c for c in report["checks"] if c["name"] == f"job.{sc.JOB}.loss-metric")["diagnosis"]
    assert "Fluent Bit" in diagnosis["cause"] and "`job` field" in diagnosis["cause"]
    assert diagnosis["command"].startswith(f"aws logs tail /aws/containerinsights/{outputs['clusterName']}/application")


def test_outputs_without_a_dashboard_warn(prod_outputs, healthy, tmp_path):
    outputs = {k: v for k, v in prod_outputs[0].items() if k != "dashboardUrl"}
    older = tmp_path / "older-outputs.json"
    older.write_text(json.dumps(outputs))
    code, report, _ = run_verify((outputs, older), healthy, tmp_path)
    assert code == 0 and by_status(report, "warn") == ["cluster.dashboard"], json.dumps(report, indent=1)


def test_verify_reads_the_metrics_the_plan_makes():
    from components.observability import training_metrics as planned
    from verify import training_metrics as read

    assert read.metrics_namespace("c") == planned.metrics_namespace_of("c")
    assert read.LOSS_METRIC in planned.METRICS
    assert {read.JOB_DIMENSION, read.NAMESPACE_DIMENSION} == set(planned.DIMENSIONS)


def nccl_scenario(healthy: Scenario, sample: str) -> Scenario:
    """The JobSet 'runs' when created: it completes and its launcher pod logs a recorded output."""
    scenario = clone(healthy)
    dispatch = healthy.on_create  # the manager's MultiKueue probe is dispatched as before

    def on_create(s: Scenario, collection: str, body: dict[str, Any]) -> None:
        if body.get("kind") != "JobSet" or body.get("spec", {}).get("managedBy") == sc.MULTIKUEUE:
            if dispatch:
                dispatch(s, collection, body)
            return
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        body["status"] = {"conditions": [{"type": "Completed", "status": "True"}]}
        pod = f"{name}-launcher-0-0-abcde"
        s.add(key("pods", ns), {"metadata": {"name": pod, "labels": {
            "jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "launcher"}},
            "spec": {}, "status": {"phase": "Succeeded"}})
        s.logs[f"{ns}/{pod}"] = (NCCL_SAMPLES / sample).read_text()

    scenario.on_create = on_create
    return scenario


def test_nccl_gate_passes_on_reference_bandwidth_and_cleans_up(prod_outputs, healthy, tmp_path):
    scenario = nccl_scenario(healthy, "p5-2node-allreduce-awsome.txt")
    code, report, fake = run_verify(prod_outputs, scenario, tmp_path, "--nccl", sc.POOL, "--nccl-image", DIGEST_IMAGE)
    assert code == 0, json.dumps(report, indent=1)
    nccl = next(c for c in report["checks"] if c["name"] == f"nccl.{sc.POOL}")
    assert nccl["status"] == "pass" and nccl["measurements"]["busbw_gbps_at_2GiB"] == 443.72
    ns = prod_outputs[0]["training"]["namespace"]
    jobsets = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
    assert fake.calls("POST") == [jobsets, f"/api/v1/namespaces/{ns}/secrets", jobsets]  # the MultiKueue probe first
    deleted = fake.calls("DELETE")
    assert any("/jobsets/verify-nccl-" in p for p in deleted) and any("/secrets/verify-nccl-" in p for p in deleted)
    assert scenario.objects[key("jobsets", ns, "jobset.x-k8s.io")][-1]["metadata"]["name"] == sc.JOB  # only ours left


def test_nccl_busbw_below_threshold_fails_only_the_gate(prod_outputs, healthy, tmp_path):
    # The p5 pool's test comes back at p4de-level bandwidth (78 GB/s instead of ~444).
    scenario = nccl_scenario(healthy, "p4de-2node-allreduce-awsome.txt")
    code, report, fake = run_verify(prod_outputs, scenario, tmp_path, "--nccl", sc.POOL, "--nccl-image", DIGEST_IMAGE)
    assert code == 1
    assert by_status(report, "fail") == [f"nccl.{sc.POOL}"]
    nccl = report["checks"][-1]
    assert "78.33 GB/s at 2 GiB, below 399.35" in nccl["summary"]
    assert "fell back to sockets" in nccl["diagnosis"]["cause"] and "NET/OFI" in nccl["diagnosis"]["command"]
    assert any("/jobsets/verify-nccl-" in p for p in fake.calls("DELETE")), "cleans up after a failure too"


def test_unknown_job_or_pool_is_bad_usage(prod_outputs, healthy, tmp_path, capsys):
    _, outputs_file = prod_outputs
    assert main(["--stack", "prod", "--outputs", str(outputs_file), "--job", "Not_A_Job"]) == 2
    assert main(["--stack", "prod", "--outputs", str(outputs_file), "--nccl", "system"]) == 2
    err = capsys.readouterr().err
    assert "--job Not_A_Job: not a job name" in err
    assert "--nccl system: not a GPU pool" in err and "needs --nccl-image" in err
    # A job name neither the stack nor its namespace knows: bad usage once the cluster has been asked.
    code, _, fake = run_verify_raw(prod_outputs[0], healthy, tmp_path, "--job", "nope")
    assert code == 2
    ns = prod_outputs[0]["training"]["namespace"]
    assert f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/nope" in fake.calls("GET")
    assert (f"--job nope: stack prod has no such job (its jobs: pretrain-p5) and namespace {ns} has no JobSet of "
            "that name") in capsys.readouterr().err


def run_verify_raw(outputs: dict[str, Any], scenario: Scenario, tmp_path: Path, *args: str) -> tuple[int, str, FakeKube]:
    """verify against `scenario` with these outputs and arguments (no --job of its own)."""
    now = time.time()
    with FakeKube(scenario) as fake, mock_aws():
        put_gpu_utilisation(outputs, scenario, now, 93.0)
        put_training_loss(outputs, now)
        outputs_file = start_runners(outputs, [TAGGED_RUNNER], tmp_path)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(fake.kubeconfig()))
        out = io.StringIO()
        with redirect_stdout(out):
            code = main(["--stack", "prod", "--outputs", str(outputs_file), "--kubeconfig", str(kubeconfig), "--json",
                         *args], now=now, cloudwatch=lambda: boto3.client("cloudwatch", region_name=outputs["region"]),
                        ec2=lambda: boto3.client("ec2", region_name=outputs["region"]),
                        service_quotas=lambda: FakeServiceQuotas(ENOUGH_QUOTAS))
    return code, out.getvalue(), fake


def test_a_job_the_stack_does_not_plan_is_checked_from_its_live_jobset(prod_outputs, healthy, plan_of, tmp_path):
    """Issue 42: a job submitted ad hoc (same manifest as the plan's, not in the stack's outputs) gets
    the same job checks, its pool, nodes and GPUs read from the JobSet the cluster has."""
    outputs = json.loads(json.dumps(prod_outputs[0]))
    promised = outputs["training"]["jobs"].pop(sc.JOB)
    ns = outputs["training"]["namespace"]
    (planned,) = [m for m in plan_of("prod").manifests() if m["kind"] == "JobSet" and m["metadata"]["name"] == sc.JOB]
    scenario = clone(healthy)
    (live,) = scenario.objects[key("jobsets", ns, "jobset.x-k8s.io")]
    live["spec"] = planned["spec"]
    live["metadata"]["labels"] = {**planned["metadata"]["labels"], "gpu-training/submitted-by": "job-command"}
    code, out, _ = run_verify_raw(outputs, scenario, tmp_path, "--job", sc.JOB)
    report = json.loads(out)
    assert code == 0, json.dumps(report, indent=1)
    ran = {c["name"] for c in report["checks"] if c["name"].startswith(f"job.{sc.JOB}.")}
    assert {f"job.{sc.JOB}.{c}" for c in ("admitted", "pods", "progress", "loss-metric", "checkpoints",
                                          "gpu-utilisation", "fabric")} <= ran
    assert by_status(report, "fail") == []
    from verify.stack_outputs import promise_of_jobset
    assert promise_of_jobset(live) == sc_promise(promised)


def sc_promise(raw: dict[str, Any]):
    from verify.stack_outputs import JobPromise

    return JobPromise(name=sc.JOB, pool=raw["pool"], nodes=raw["nodes"], gpus_per_node=raw["gpusPerNode"])


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "verify"), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_help_documents_every_flag():
    from verify.cli import build_parser

    run = _script("--help")
    assert run.returncode == 0
    flags = [o for action in build_parser()._actions for o in action.option_strings if o.startswith("--")]
    assert len(flags) >= 12
    for flag in flags:
        assert flag in run.stdout, flag
    assert "exit status: 0" in run.stdout


def test_no_cluster_reachable_exits_2_with_a_clear_message(prod_outputs, tmp_path):
    # A closed port on 127.0.0.1: nothing listens, like an unreachable endpoint.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                                          "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                                          "users": [{"name": "x", "user": {}}],
                                          "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    run = _script("--stack", "prod", "--outputs", str(prod_outputs[1]), "--kubeconfig", str(kubeconfig))
    assert run.returncode == 2
    assert f"verify: error: no cluster reachable: cannot reach the cluster API at http://127.0.0.1:{port}" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout


def test_the_plans_outputs_alone_exit_2_without_a_traceback(prod_outputs):
    # The offline plan's kubeconfig names a cluster that does not exist (and `aws` may be missing).
    run = _script("--stack", "prod", "--outputs", str(prod_outputs[1]))
    assert run.returncode == 2
    assert run.stderr.startswith("verify: error: no cluster reachable:")
    assert "Traceback" not in run.stderr
