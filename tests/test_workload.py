"""The training workload of every stack: namespace guard rails, queues, and the JobSets."""

import hashlib
import re

import pytest
import yaml
from stack_configs import MANIFEST_STACKS, PLATFORM_STACKS, PROJECT, environment_of, raw_config

from components.cluster.pool_scheduling import POOL_LABEL
from components.config import load_stack_config

pytestmark = pytest.mark.parametrize("stack", PLATFORM_STACKS)
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"


def manifests(plan, kind):
    return [m for m in plan.manifests() if m["kind"] == kind]


def jobsets(plan):
    return manifests(plan, "JobSet")


def pod_spec(jobset):
    (replicated,) = jobset["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]["spec"]


def trainer(jobset):
    (container,) = pod_spec(jobset)["containers"]
    return container


def env_of(jobset):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in trainer(jobset)["env"]}


def test_every_configured_job_is_a_queued_jobset(stack, plan_of):
    plan = plan_of(stack)
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    assert {j["metadata"]["name"] for j in jobsets(plan)} == {j.name for j in config.training.jobs}
    local_queues = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in manifests(plan, "LocalQueue")}
    cluster_queues = {q["metadata"]["name"]: q for q in manifests(plan, "ClusterQueue")}
    flavors = {f["metadata"]["name"] for f in manifests(plan, "ResourceFlavor")}
    for jobset in jobsets(plan):
        namespace = jobset["metadata"]["namespace"]
        local = local_queues[(namespace, jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"])]
        queue = cluster_queues[local["spec"]["clusterQueue"]]
        assert queue["spec"]["cohortName"] == environment_of(stack)
        assert {f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]} <= flavors


def test_a_budget_holds_every_non_spot_gang_against_eviction(stack, plan_of):
    """A node group update drains through the eviction API: it must fail on a running reserved or
    on-demand gang, never evict it; a spot gang keeps its drain (the node leaves anyway)."""
    plan = plan_of(stack)
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    pools = {p.name: p for p in config.node_pools}
    budgets = manifests(plan, "PodDisruptionBudget")
    for jobset in jobsets(plan):
        labels = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
        holding = [b for b in budgets if b["metadata"]["namespace"] == jobset["metadata"]["namespace"]
                   and b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        job = next(j for j in config.training.jobs if j.name == jobset["metadata"]["name"])
        if str(pools[job.pool].capacity) == "spot":
            assert holding == [], jobset["metadata"]["name"]
        else:
            # every pod of the gang (one per node) stays: an integer minAvailable, as Job-owned pods need
            assert [(b["spec"]["minAvailable"], b["spec"]["unhealthyPodEvictionPolicy"]) for b in holding] == [
                (job.nodes, "AlwaysAllow")], jobset["metadata"]["name"]
            assert "maxUnavailable" not in holding[0]["spec"]
    assert len(budgets) == sum(str(pools[j.pool].capacity) != "spot" for j in config.training.jobs)


def test_the_launcher_knows_the_grace_and_the_old_checkpoint_layout(stack, plan_of):
    """The launcher ends a stop by the pod's grace (minus its own margin, which the grace check
    covers), and a run without checkpoints of its own resumes from /workspace/checkpoints/<job>."""
    from launcher.contract import STOP_MARGIN_S as LAUNCHER_MARGIN_S

    from components.facts.file_systems import STOP_MARGIN_S
    assert STOP_MARGIN_S > LAUNCHER_MARGIN_S
    for jobset in jobsets(plan_of(stack)):
        env, name = env_of(jobset), jobset["metadata"]["name"]
        assert env["TRAIN_TERMINATION_GRACE_S"] == str(pod_spec(jobset)["terminationGracePeriodSeconds"])
        assert env["TRAIN_LEGACY_CHECKPOINT_DIR"] == f"/workspace/checkpoints/{name}" != env["TRAIN_CHECKPOINT_DIR"]


def test_a_job_without_args_runs_its_images_own_command(stack, plan_of):
    """The pod's args replace the image's CMD only when the job states them."""
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    stated = {j.name: list(j.args) for j in config.training.jobs}
    for jobset in jobsets(plan_of(stack)):
        assert trainer(jobset).get("args", []) == stated[jobset["metadata"]["name"]]
    raw = raw_config(stack)
    jobs = raw.get(f"{PROJECT}:training", {}).get("jobs", [])
    assert all(("args" in job) == bool(stated[job["name"]]) for job in jobs)


def test_sysctl_pins_the_range_the_fabric_group_opens(stack, plan_of):
    plan = plan_of(stack)
    socket_rules = {(r["inputs"]["fromPort"], r["inputs"]["toPort"]) for r in plan.of_type(INGRESS)
                    if r["inputs"]["securityGroupId"] == "security-groups-socket-fabric-id"}
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    for jobset in jobsets(plan):
        (sysctl,) = pod_spec(jobset)["securityContext"]["sysctls"]
        assert sysctl["name"] == "net.ipv4.ip_local_port_range"
        first, last = map(int, sysctl["value"].split())
        assert (first, last) == (config.fabric.nccl_port_range.first, config.fabric.nccl_port_range.last)
        if socket_rules:
            assert (first, last) in socket_rules, "the security group opens exactly the pinned range"
            assert (int(env_of(jobset)["TRAIN_RDZV_PORT"]),) * 2 in socket_rules


def test_devices_and_memory_are_exclusive_and_cpu_is_not_capped(stack, plan_of):
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    for jobset in jobsets(plan_of(stack)):
        resources = trainer(jobset)["resources"]
        job = next(j for j in config.training.jobs if j.name == jobset["metadata"]["name"])
        requests, limits = dict(resources["requests"]), resources["limits"]
        # The CPU request is computed headroom; a limit only where the job configures `cpu`.
        assert ("cpu" in limits) == (job.cpu is not None)
        assert requests.pop("cpu") and {k: v for k, v in limits.items() if k != "cpu"} == requests
        assert int(limits["nvidia.com/gpu"]) == int(env_of(jobset)["PET_NPROC_PER_NODE"]) >= 1
        # For one release the old names say the same, for images whose launcher reads only those.
        env = env_of(jobset)
        assert (env["TRAIN_NNODES"], env["TRAIN_NPROC_PER_NODE"]) == (env["PET_NNODES"], env["PET_NPROC_PER_NODE"])
        # libfabric runs without huge pages (FI_EFA_USE_HUGE_PAGE=0: DataLoader workers fork), so no
        # pod reserves any: they would sit unused, or leave the pod Pending on a node without them.
        assert "hugepages-2Mi" not in limits
        if "vpc.amazonaws.com/efa" in limits:
            assert env_of(jobset)["FI_EFA_USE_HUGE_PAGE"] == "0"


def test_quotas_cover_the_largest_gang(stack, plan_of):
    plan = plan_of(stack)
    # The job's namespace's (a platform's plan also holds its registered teams': team_tenancy.py).
    quotas = {q["metadata"]["namespace"]: q for q in manifests(plan, "ResourceQuota")}
    for jobset in jobsets(plan):
        quota = quotas[jobset["metadata"]["namespace"]]
        gang = int(env_of(jobset)["PET_NNODES"]) * int(trainer(jobset)["resources"]["requests"]["nvidia.com/gpu"])
        assert int(quota["spec"]["hard"]["requests.nvidia.com/gpu"]) >= gang
        pool = pod_spec(jobset)["nodeSelector"]["gpu-training/pool"]
        # The namespace's own queue (a platform's plan also holds its registered teams').
        (cluster_queue,) = [q for q in manifests(plan, "ClusterQueue") if q["metadata"]["name"] == jobset["metadata"]["namespace"]]
        flavor = next(f for g in cluster_queue["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == f"pool-{pool}")
        nominal = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
        assert nominal["nvidia.com/gpu"] >= gang, "a gang above its queue's quota would never be admitted"


def test_training_pods_are_hardened(stack, plan_of):
    for jobset in jobsets(plan_of(stack)):
        spec = pod_spec(jobset)
        assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] > 0
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False and spec["serviceAccountName"] == "trainer"
        container = trainer(jobset)
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert "@sha256:" in container["image"]
        for forbidden in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(forbidden)
        shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
        assert shm["emptyDir"]["medium"] == "Memory"
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/workspace/checkpoints", "/workspace/data", "/dev/shm"} <= mounts
        assert container["livenessProbe"]["exec"]["command"][0] == "heartbeat-check"
        assert spec["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_disruptions_restart_the_gang_without_spending_restarts(stack, plan_of):
    for jobset in jobsets(plan_of(stack)):
        rules = {r["name"]: r for r in jobset["spec"]["failurePolicy"]["rules"]}
        assert rules["disruption"]["action"] == "RestartJobSetAndIgnoreMaxRestarts"
        assert rules["contract_error"]["action"] == "FailJobSet"
        # JobSet's admission webhook (not its CRD schema) rejects other rule names.
        assert all(re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", name) for name in rules)
        (replicated,) = jobset["spec"]["replicatedJobs"]
        job_spec = replicated["template"]["spec"]
        assert job_spec["backoffLimit"] == 0 and job_spec["completionMode"] == "Indexed"
        assert {"type": "DisruptionTarget"} in job_spec["podFailurePolicy"]["rules"][0]["onPodConditions"]
        assert pod_spec(jobset)["restartPolicy"] == "Never"
        assert jobset["spec"]["network"]["enableDNSHostnames"] is True
        # No TTL unless asked: a JobSet Kubernetes deleted would be re-created (re-run) by a refresh.
        assert "ttlSecondsAfterFinished" not in jobset["spec"]
        assert env_of(jobset)["TRAIN_RDZV_HOST"] == f"{jobset['metadata']['name']}-node-0-0.{jobset['metadata']['name']}"


def _job_failure(job_spec, exit_code, conditions):
    """(reason, message) of the Job that one failed pod fails, as the Job controller words them
    (kubernetes pkg/controller/job/pod_failure_policy.go; backoffLimit 0: no rule, no retry)."""
    for index, rule in enumerate(job_spec["podFailurePolicy"]["rules"]):
        if "onExitCodes" in rule:
            codes = rule["onExitCodes"]
            if exit_code != 0 and (exit_code in codes["values"]) == (codes["operator"] == "In"):
                return "PodFailurePolicy", (f"Container {codes['containerName']} for pod ns/pod failed with exit code "
                                            f"{exit_code} matching {rule['action']} rule at index {index}")
        else:
            matched = [c["type"] for c in rule["onPodConditions"] if c["type"] in conditions]
            if matched:
                return "PodFailurePolicy", f"Pod ns/pod has condition {matched[0]} matching {rule['action']} rule at index {index}"
    return "BackoffLimitExceeded", "Job has reached the specified backoff limit"


def _jobset_action(jobset, reason, message):
    """The first failure policy rule that matches the Job's failure (an empty list matches all)."""
    for rule in jobset["spec"]["failurePolicy"]["rules"]:
        reasons, patterns = rule.get("onJobFailureReasons", []), rule.get("onJobFailureMessagePatterns", [])
        if (not reasons or reason in reasons) and (not patterns or any(re.search(p, message) for p in patterns)):
            return rule["action"]
    return "RestartJobSet"  # JobSet's default: restart, counting against maxRestarts


@pytest.mark.parametrize(("exit_code", "conditions", "action"), [
    (143, {"DisruptionTarget"}, "RestartJobSetAndIgnoreMaxRestarts"),  # the pod a spot reclaim evicted
    (143, set(), "RestartJobSetAndIgnoreMaxRestarts"),                 # a peer whose workers stopped with it
    (2, set(), "FailJobSet"),                                          # contract or hparams error
    (1, set(), "RestartJobSet"),                                       # a crash spends a restart
    (137, set(), "RestartJobSet"),                                     # OOM kill
])
def test_the_gang_fails_or_restarts_by_what_the_first_failed_pod_says(stack, plan_of, exit_code, conditions, action):
    """The Job fails on whichever failed pod its controller sees first; after a spot reclaim
    that may be a peer of the evicted pod, which exits 143 without DisruptionTarget."""
    for jobset in jobsets(plan_of(stack)):
        (replicated,) = jobset["spec"]["replicatedJobs"]
        reason, message = _job_failure(replicated["template"]["spec"], exit_code, conditions)
        assert _jobset_action(jobset, reason, message) == action, message


def test_each_launcher_outcome_gets_the_jobset_action_its_table_says(stack, plan_of):
    """launcher/outcome.py's table (trainer/README.md's exit codes) against the planned failure
    policies: a stop restarts for free, a config error fails at once, a crash spends a restart."""
    from launcher.outcome import OUTCOMES, JobSetAction

    for jobset in jobsets(plan_of(stack)):
        (replicated,) = jobset["spec"]["replicatedJobs"]
        for outcome, ending in OUTCOMES.items():
            if ending.action is JobSetAction.NONE:
                assert ending.code == 0, outcome
                continue
            reason, message = _job_failure(replicated["template"]["spec"], ending.code, set())
            assert _jobset_action(jobset, reason, message) == ending.action.split(":")[0], (outcome, message)


def test_hyperparameters_hash_rolls_the_job(stack, plan_of):
    plan = plan_of(stack)
    config_maps = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in manifests(plan, "ConfigMap")}
    for jobset in jobsets(plan):
        volume = next(v for v in pod_spec(jobset)["volumes"] if v["name"] == "hyperparameters")
        data = config_maps[(jobset["metadata"]["namespace"], volume["configMap"]["name"])]["data"]["hparams.yaml"]
        template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        assert template["metadata"]["annotations"]["gpu-training/hyperparameters-sha256"] == hashlib.sha256(data.encode()).hexdigest()


def test_secret_env_comes_from_the_synced_secret(stack, plan_of):
    plan = plan_of(stack)
    (external_secret,) = manifests(plan, "ExternalSecret")
    synced = {d["secretKey"] for d in external_secret["spec"]["data"]}
    target = external_secret["spec"]["target"]["name"]
    for jobset in jobsets(plan):
        refs = [e["valueFrom"]["secretKeyRef"] for e in trainer(jobset)["env"] if "secretKeyRef" in e.get("valueFrom", {})]
        assert refs and all(r["name"] == target and r["key"] in synced for r in refs)


def test_namespace_guard_rails(stack, plan_of):
    plan = plan_of(stack)
    namespace = f"training-{environment_of(stack)}"
    (ns,) = [n for n in manifests(plan, "Namespace") if n["metadata"]["name"] == namespace]
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    assert all(m["metadata"].get("namespace") != "default" for m in plan.manifests())
    policies = {p["metadata"]["name"]: p["spec"] for p in manifests(plan, "NetworkPolicy") if p["metadata"]["namespace"] == namespace}
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert {"allow-same-namespace", "allow-dns", "allow-https-egress", "allow-pod-identity-agent"} <= set(policies)
    (limit_range,) = [m for m in manifests(plan, "LimitRange") if m["metadata"]["namespace"] == namespace]
    assert limit_range["spec"]["limits"][0]["default"]


def test_kueue_waits_longer_than_a_healthy_gang_takes_to_start(stack, plan_of):
    plan = plan_of(stack)
    (kueue,) = [r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "kueue"]
    configuration = yaml.safe_load(kueue["values"]["managerConfig"]["controllerManagerConfigYaml"])
    timeout_minutes = int(configuration["waitForPodsReady"]["timeout"].removesuffix("m"))
    # v1beta2: the block's presence enables it; v1beta1's `enable` would fail strict decoding.
    assert configuration["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and "enable" not in configuration["waitForPodsReady"]
    assert "jobset.x-k8s.io/jobset" in configuration["integrations"]["frameworks"]
    for jobset in jobsets(plan):
        startup = trainer(jobset)["startupProbe"]
        assert timeout_minutes * 60 > startup["periodSeconds"] * startup["failureThreshold"]
    # A gang that loses a node mid-run is requeued after the autoscaler's node wait, not Kueue's
    # implicit 60 minutes (recoveryTimeout defaults to timeout).
    recovery_minutes = int(configuration["waitForPodsReady"]["recoveryTimeout"].removesuffix("m"))
    for jobset in jobsets(plan):  # a restart that is slow but healthy is never requeued
        startup = trainer(jobset)["startupProbe"]
        assert recovery_minutes * 60 > startup["periodSeconds"] * startup["failureThreshold"]
    # MultiKueue nominates the first-listed worker alone, the next after 5 minutes (Kueue v0.19.2's
    # v1beta2 MultiKueue fields: dispatcherName, incrementalDispatcherConfig.stepSize).
    assert configuration["multiKueue"] == {"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                                           "incrementalDispatcherConfig": {"stepSize": 1}}


def test_jobs_tolerate_every_taint_of_their_pool(stack, plan_of):
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    pools = {p.name: p for p in config.node_pools}
    for jobset in jobsets(plan_of(stack)):
        pool = pools[pod_spec(jobset)["nodeSelector"]["gpu-training/pool"]]
        tolerated = {(t["key"], t["value"], t["effect"]) for t in pod_spec(jobset)["tolerations"]}
        assert {("nvidia.com/gpu", "true", "NoSchedule")} | {(t.key, t.value, t.effect) for t in pool.taints} <= tolerated


def zones_of_pools(platform_plan):
    """Pool name -> the AZs its node groups' subnets are in (the mock subnet id is `<name>-id`)."""
    zone_of = {s["name"] + "-id": s["inputs"]["availabilityZone"] for s in platform_plan.of_type("aws:ec2/subnet:Subnet")}
    zones: dict[str, set[str]] = {}
    for group in platform_plan.of_type("aws:eks/nodeGroup:NodeGroup"):
        pool = group["inputs"]["labels"][POOL_LABEL]
        zones.setdefault(pool, set()).update(zone_of[subnet] for subnet in group["inputs"]["subnetIds"])
    return zones


def test_a_multi_node_jobs_pods_all_land_in_one_zone(stack, plan_of):
    """Each JobSet's pods are pinned to their pool (nodeSelector), and the pool of a gang has node
    groups in one AZ only: nothing else keeps the autoscaler's nodes for one gang together. A
    platform job's gang also sits in the Lustre file system's zone: its checkpoints cross no AZ."""
    for job_stack in [stack] + [team for team in MANIFEST_STACKS if team.endswith(f"-{stack}")]:
        _check_gangs_in_one_zone(plan_of(stack), plan_of(job_stack), team=job_stack != stack)


def _check_gangs_in_one_zone(platform, jobs_plan, *, team):
    zones = zones_of_pools(platform)
    lustre_subnets = {fs["inputs"]["subnetIds"] for fs in platform.of_type(LUSTRE)}  # one subnet, as a string
    [lustre_zone] = {s["inputs"]["availabilityZone"] for s in platform.of_type("aws:ec2/subnet:Subnet")
                     if s["name"] + "-id" in lustre_subnets} or {None}
    assert bool(lustre_zone) is bool(platform.of_type(LUSTRE))
    gangs = 0
    for jobset in jobsets(jobs_plan):
        (replicated,) = jobset["spec"]["replicatedJobs"]
        pods = replicated["replicas"] * replicated["template"]["spec"]["parallelism"]
        pool = pod_spec(jobset)["nodeSelector"][POOL_LABEL]
        if pods > 1:
            gangs += 1
            assert len(zones[pool]) == 1, f"{jobset['metadata']['name']}: {pods} pods on pool {pool} in {zones[pool]}"
        if lustre_zone and not team:  # team jobs checkpoint to EFS
            assert zones[pool] == {lustre_zone}, f"{jobset['metadata']['name']} reads Lustre in {lustre_zone} from {zones[pool]}"
    assert gangs, "no multi-node job to check"
