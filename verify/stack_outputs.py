"""A stack's outputs, read from `pulumi stack output --json` or from a file (the same JSON; the
offline plan writes one to build/<stack>/outputs.json), checked into typed promises."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.cluster.pool_scheduling import GPU_RESOURCE, POOL_LABEL
from components.config import Taint, TaintEffect

PULUMI_TIMEOUT_SECONDS = 120


class UsageError(Exception):
    """Bad input or an unusable environment: exit 2 with this message, no traceback."""


@dataclass(frozen=True)
class PoolPromise:
    name: str
    gpus_per_node: int
    efa_per_node: int
    instance_types: tuple[str, ...]
    taints: tuple[Taint, ...]

    @property
    def gpu(self) -> bool:
        return self.gpus_per_node > 0


@dataclass(frozen=True)
class JobPromise:
    name: str
    pool: str
    nodes: int
    gpus_per_node: int


@dataclass(frozen=True)
class StackOutputs:
    cluster_name: str
    region: str
    kubeconfig: dict[str, Any] | None
    """None when the outputs do not carry it (then --kubeconfig is needed)."""
    pools: dict[str, PoolPromise]
    namespace: str
    local_queue: str
    secret: str | None
    jobs: dict[str, JobPromise]
    nccl_ports: tuple[int, int]
    rendezvous_port: int
    environment: str | None = None
    ci_runner_security_group: str | None = None
    """The platform stack's CI runners' security group (`ciRunnerSecurityGroupId`); None in team stacks."""
    dashboard_url: str | None = None
    """The stack's CloudWatch dashboard (None: a program older than the output)."""
    multikueue_role: str | None = None
    """`multiKueue.role` of the stack (manager: verify checks its workers and dispatches a probe)."""
    probe_image: str | None = None
    probe_pool: str = ""
    """The GPU pool the MultiKueue probe asks a worker for ("" before the program exported it: no GPU then)."""
    """The image the MultiKueue probe runs (the trainer image; present on every worker's nodes' registry path)."""


def promise_of_jobset(jobset: dict[str, Any]) -> JobPromise | None:
    """What a live JobSet promises (its pool, nodes and GPUs per node), for a job the stack's outputs
    do not name: one submitted ad hoc into the namespace with the plan's manifest
    (components/workload/training_job.py jobset_manifest). None for a JobSet of another shape."""
    try:
        (replicated,) = jobset["spec"]["replicatedJobs"]
        job = replicated["template"]["spec"]
        pod = job["template"]["spec"]
        (trainer,) = [c for c in pod["containers"] if c.get("name") == "trainer"]
        gpus = int((trainer.get("resources", {}).get("limits") or {}).get(GPU_RESOURCE, 0))
        return JobPromise(name=jobset["metadata"]["name"], pool=str(pod["nodeSelector"][POOL_LABEL]),
                          nodes=int(job["parallelism"]), gpus_per_node=gpus)
    except (KeyError, TypeError, ValueError):
        return None


def read_outputs(stack: str, outputs_file: str | None) -> dict[str, Any]:
    if outputs_file:
        try:
            text = Path(outputs_file).read_text()
        except OSError as e:
            raise UsageError(f"--outputs {outputs_file}: cannot read it ({e.strerror})") from e
        source = f"--outputs {outputs_file}"
    else:
        if shutil.which("pulumi") is None:
            raise UsageError("the pulumi CLI is not on PATH: install it, or pass the stack's outputs with "
                             f"--outputs FILE (`pulumi stack output --json --stack {stack} > FILE`, or "
                             f"build/{stack}/outputs.json from `make plan STACK={stack}`)")
        try:
            run = subprocess.run(["pulumi", "stack", "output", "--json", "--stack", stack],
                                 capture_output=True, text=True, timeout=PULUMI_TIMEOUT_SECONDS, check=False)
        except subprocess.TimeoutExpired as e:
            raise UsageError(f"`pulumi stack output --stack {stack}` did not answer in {PULUMI_TIMEOUT_SECONDS} s") from e
        if run.returncode != 0:
            reason = (run.stderr.strip().splitlines() or ["no message"])[-1]
            raise UsageError(f"`pulumi stack output --json --stack {stack}` failed: {reason}")
        text, source = run.stdout, f"`pulumi stack output --json --stack {stack}`"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{source} is not JSON ({e.msg} at line {e.lineno})") from e
    if not isinstance(data, dict):
        raise UsageError(f"{source} is not a JSON object of stack outputs")
    return data


def parse_outputs(stack: str, data: dict[str, Any]) -> StackOutputs:
    """Typed promises from raw outputs; every missing or malformed key is listed at once."""
    problems: list[str] = []

    def need(container: dict[str, Any], key: str, kind: type, where: str = "") -> Any:
        value = container.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            problems.append(f"{where}{key}: expected {kind.__name__}, got {json.dumps(value)[:60]}")
            return kind()
        return value

    def effect(taint: dict[str, Any], where: str) -> TaintEffect:
        value = taint.get("effect")
        if not isinstance(value, str) or value not in tuple(TaintEffect):
            problems.append(f"{where}taints: effect: expected one of {', '.join(TaintEffect)}, got {json.dumps(value)[:60]}")
            return TaintEffect.NO_SCHEDULE  # reported: no promise is made of these outputs
        return TaintEffect(value)

    cluster_name = need(data, "clusterName", str)
    region = need(data, "region", str)
    kubeconfig = _kubeconfig(data.get("kubeconfig"))
    pools: dict[str, PoolPromise] = {}
    for name, raw in need(data, "nodePools", dict).items():
        where = f"nodePools.{name}."
        raw = raw if isinstance(raw, dict) else {}
        pools[name] = PoolPromise(
            name=name,
            gpus_per_node=need(raw, "gpusPerNode", int, where),
            efa_per_node=need(raw, "efaPerNode", int, where),
            instance_types=tuple(need(raw, "instanceTypes", list, where)),
            taints=tuple(Taint(key=str(t.get("key")), value=str(t.get("value")), effect=effect(t, where))
                         for t in need(raw, "taints", list, where) if isinstance(t, dict)),
        )
    training = need(data, "training", dict)
    jobs: dict[str, JobPromise] = {}
    for name, raw in need(training, "jobs", dict, "training.").items():
        where = f"training.jobs.{name}."
        raw = raw if isinstance(raw, dict) else {}
        jobs[name] = JobPromise(name=name, pool=need(raw, "pool", str, where), nodes=need(raw, "nodes", int, where),
                                gpus_per_node=need(raw, "gpusPerNode", int, where))
    ports = need(data, "ncclPortRange", dict)
    rendezvous = need(data, "rendezvousPorts", list)
    secret = training.get("secret")
    namespace = need(training, "namespace", str, "training.")
    local_queue = need(training, "localQueue", str, "training.")
    if problems:
        raise UsageError(f"the outputs of stack {stack} lack what verify needs: " + "; ".join(problems)
                         + ". Run `pulumi up` with this version of the program first (it exports them)")
    return StackOutputs(
        cluster_name=cluster_name, region=region, kubeconfig=kubeconfig, pools=pools,
        namespace=namespace, local_queue=local_queue,
        secret=secret if isinstance(secret, str) else None, jobs=jobs,
        nccl_ports=(int(ports.get("first", 0)), int(ports.get("last", 0))),
        rendezvous_port=int(rendezvous[0]) if rendezvous else 29400,
        environment=_text(data.get("environment")),
        ci_runner_security_group=_text(data.get("ciRunnerSecurityGroupId")),
        dashboard_url=data["dashboardUrl"] if isinstance(data.get("dashboardUrl"), str) else None,
        multikueue_role=multikueue.get("role") if isinstance(multikueue := data.get("multiKueue"), dict) else None,
        probe_image=multikueue.get("probeImage") if isinstance(multikueue, dict) else None,
        probe_pool=str(multikueue.get("probePool") or "") if isinstance(multikueue, dict) else "",
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _kubeconfig(value: Any) -> dict[str, Any] | None:
    """The output as a mapping or its JSON text; None for anything else, such as the `[secret]`
    that `pulumi stack output` prints without --show-secrets."""
    if isinstance(value, str):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    return value if isinstance(value, dict) else None
