"""FSx for Lustre (storage.lustre): its validation, the flush-time check of grace periods, and what
the prod stack creates: the file system, its data repository association, its security group,
the key that lets FSx read the datasets bucket, the CSI volumes, and the jobs that mount them."""

from __future__ import annotations

import copy
import json

import api_limits
import pytest
from plan_queries import inputs_by_name
from stack_configs import DELETE, PLATFORM_STACKS, PROJECT, mutate, raw_config

from components.config import ConfigError
from components.config.storage import StorageConfig
from components.facts import file_systems
from components.facts.eks_versions import ADDON_VERSIONS
from offline.plan import planned_config

ACCOUNT = "123456789012"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
LUSTRE_SG = "security-groups-lustre-id"
NODES_SG = "security-groups-nodes-id"


def load(raw, stack="prod"):
    return planned_config(stack, raw=raw)


def errors_of(raw, stack="prod") -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load(raw, stack)
    return raised.value.errors


def with_lustre(stack="dev", **lustre):
    return mutate(raw_config(stack), "storage.lustre",
                  {"storageCapacityGiB": 2400, "throughputPerTiB": 250, "readMBpsPerGpu": 100, **lustre})


def prod_at_12000(raw=None):
    """prod's file system as it was before it was sized from its GPUs: 12000 GiB x 125 MB/s per
    TiB (10 OSTs), with a read target it meets (32 GPUs x 45 MB/s): the write model's figures."""
    raw = mutate(raw or raw_config("prod"), "storage.lustre.storageCapacityGiB", 12000)
    return mutate(raw, "storage.lustre.readMBpsPerGpu", 45)


# ------------------------------------------------------------------------------ facts


@pytest.mark.parametrize(("capacity", "valid"), [
    (1200, True), (2400, True), (4800, True), (7200, True), (9600, True), (100800, True),
    (1000, False), (1800, False), (3600, False), (6000, False), (0, False),
])
def test_lustre_capacity_steps(capacity, valid):
    assert (file_systems.lustre_capacity_problem(capacity) is None) is valid


@pytest.mark.parametrize(("capacity", "per_tib", "mb_s"), [
    (1200, 125, 146.48), (2400, 250, 585.94), (4800, 500, 2343.75), (9600, 1000, 9375.0),
])
def test_lustre_throughput_is_capacity_times_throughput_per_tib(capacity, per_tib, mb_s):
    assert file_systems.lustre_throughput_mb_s(capacity, per_tib) == pytest.approx(mb_s, abs=0.01)


@pytest.mark.parametrize(("clients", "mb_s"), [(1, 524.29), (2, 1048.58), (3, 1073.74), (64, 1073.74)])
def test_efs_write_throughput_is_the_lower_of_client_and_file_system_limits(clients, mb_s):
    assert file_systems.efs_write_mb_s(clients) == pytest.approx(mb_s, abs=0.01)


@pytest.mark.parametrize(("gib", "mb_s", "flush_s", "grace_s"), [
    (80, 1464.84, 58.64, 148),  # prod: 80 GiB on 11.7 TiB x 125 MB/s/TiB
    (100, 2343.75, 45.81, 122),  # 100 GiB on 4.7 TiB x 500 MB/s/TiB
    (100, 1048.58, 102.4, 235),  # the same on EFS from 2 nodes
    (1, 1048.58, 1.02, 33),
    (1000, 9375.0, 114.53, 260),
])
def test_flush_time_and_grace_needed(gib, mb_s, flush_s, grace_s):
    assert file_systems.flush_seconds(gib, mb_s) == pytest.approx(flush_s, abs=0.01)
    assert file_systems.grace_needed_seconds(gib, mb_s) == grace_s


# ----------------------------------------------------------------------------- config


def test_prod_uses_lustre_and_dev_staging_keep_efs():
    prod = load(raw_config("prod"))
    assert prod.storage.lustre is not None
    assert (prod.storage.lustre.deployment_type, prod.storage.lustre.storage_capacity_gib,
            prod.storage.lustre.throughput_per_tib, prod.storage.lustre.availability_zone,
            prod.storage.lustre.read_mb_s_per_gpu) == ("PERSISTENT_2", 26400, 125, "use1-az4", 100)
    for stack in ("dev", "staging"):
        assert load(raw_config(stack), stack).storage.lustre is None


def test_lustre_defaults():
    lustre = load(mutate(raw_config("dev"), "storage.lustre",
                         {"storageCapacityGiB": 1200, "throughputPerTiB": 125, "readMBpsPerGpu": 25}), "dev").storage.lustre
    assert lustre is not None and lustre.deployment_type == "PERSISTENT_2"
    assert lustre.availability_zone == "use1-az4", "the zone of the pool its jobs run on (dev's gpu-spot) unless told otherwise"


# (case id, key under storage.lustre, value, text the error must contain besides key and value)
INVALID_LUSTRE = [
    ("capacity-between-steps", "storageCapacityGiB", 3600, "nearest: 2400 or 4800"),
    ("capacity-too-small", "storageCapacityGiB", 1000, "nearest: 1200"),
    ("capacity-text", "storageCapacityGiB", "2400", "whole number"),
    ("throughput-not-offered", "throughputPerTiB", 200, "MB/s per TiB: 125, 250, 500, 1000"),
    ("scratch", "deploymentType", "SCRATCH_2", "no second copy"),
    ("persistent-1", "deploymentType", "PERSISTENT_1", "previous generation"),
    ("not-a-type", "deploymentType", "FAST", "not an FSx for Lustre deployment type"),
    ("zone-outside-network", "availabilityZone", "us-east-1d", "neither an AZ ID nor one of the network's"),
    ("zone-id-of-another-region", "availabilityZone", "usw2-az1", "an AZ ID of another region than us-east-1"),
    ("zone-id-unknown", "availabilityZone", "use1-az9", "not an AZ ID of us-east-1"),
    ("typo", "throughputPerTB", 250, "did you mean 'throughputPerTiB'"),
]


@pytest.mark.parametrize(("key", "value", "expected"), [c[1:] for c in INVALID_LUSTRE], ids=[c[0] for c in INVALID_LUSTRE])
def test_invalid_lustre_config_names_key_and_value(key, value, expected):
    errors = errors_of(mutate(with_lustre(), f"storage.lustre.{key}", value), "dev")
    matching = [e for e in errors if expected in e]
    assert matching, errors
    assert matching[0].startswith(f"{PROJECT}:storage.lustre.{key}: ") and "Fix:" in matching[0]
    assert repr(value) in matching[0] or "unknown key" in matching[0]


def test_missing_lustre_keys_are_reported_together():
    errors = errors_of(mutate(raw_config("dev"), "storage.lustre", {"availabilityZone": "us-east-1b"}), "dev")
    assert any("storage.lustre.storageCapacityGiB: required key is missing" in e for e in errors)
    assert any("storage.lustre.throughputPerTiB: required key is missing" in e for e in errors)
    assert any("storage.lustre.readMBpsPerGpu: required key is missing" in e for e in errors)


def test_lustre_zone_defaults_to_the_zone_of_the_pools_its_jobs_run_on():
    without_zone = mutate(raw_config("prod"), "storage.lustre.availabilityZone", DELETE)
    assert load(without_zone).storage.lustre.availability_zone == "use1-az4", "the p5-efa pool's, where pretrain-p5 runs"
    # No EFA or reserved pool: the first GPU pool of the jobs that runs in one zone.
    raw = with_lustre()
    pools = [dict(pool) for pool in raw[f"{PROJECT}:nodePools"]]
    pools[1]["availabilityZones"] = ["use1-az6"]
    pinned = mutate(raw, "nodePools", pools)
    assert load(pinned, "dev").storage.lustre.availability_zone == "use1-az6"
    # Jobs on pools spread over zones (single-node jobs: a gang must stay in one): the network's first.
    spread = [dict(pool) for pool in raw[f"{PROJECT}:nodePools"]]
    spread[1]["availabilityZones"] = ["use1-az4", "use1-az6"]
    jobs = [{**job, "nodes": 1} for job in raw[f"{PROJECT}:training"]["jobs"]]
    assert load(mutate(mutate(raw, "nodePools", spread), "training.jobs", jobs), "dev").storage.lustre.availability_zone \
        == "us-east-1a"


# (lustre zone, the message's text) against prod's p5-efa pool in use1-az4; None: accepted.
LUSTRE_ZONE_AGAINST_EFA_POOL = [
    ("use1-az4", None),
    ("use1-az6", "use1-az6 is not the zone of pool p5-efa, use1-az4"),
    ("us-east-1b", None),  # a name against an AZ ID: judged by the program, once the account resolves the ID
]


@pytest.mark.parametrize(("zone", "expected"), LUSTRE_ZONE_AGAINST_EFA_POOL)
def test_a_lustre_zone_away_from_the_efa_pool_is_refused_naming_the_key(zone, expected):
    raw = mutate(raw_config("prod"), "storage.lustre.availabilityZone", zone)
    if expected is None:
        assert load(raw).storage.lustre.availability_zone == zone
        return
    (error,) = errors_of(raw)
    assert error.startswith(f"{PROJECT}:storage.lustre.availabilityZone: ") and expected in error, error
    assert "cross zones" in error and "Fix: set availabilityZone: use1-az4" in error


def test_jobs_on_efa_pools_of_two_zones_cannot_share_one_file_system():
    raw = raw_config("prod")
    pools = [dict(pool) for pool in raw[f"{PROJECT}:nodePools"]]
    second = {**next(p for p in pools if p["name"] == "p5-efa"), "name": "p5-efa-b", "availabilityZones": ["use1-az6"],
              "capacityReservationId": "cr-0fedcba9876543210"}
    training = raw[f"{PROJECT}:training"]
    jobs = [*training["jobs"], {**training["jobs"][0], "name": "pretrain-b", "pool": "p5-efa-b"}]
    raw = mutate(mutate(raw, "nodePools", [*pools, second]), "training",
                 {**training, "gpuQuota": {**training["gpuQuota"], "p5-efa-b": 16}, "jobs": jobs})
    errors = [e for e in errors_of(mutate(raw, "storage.lustre.availabilityZone", DELETE)) if "availabilityZone" in e]
    (error,) = errors
    assert error.startswith(f"{PROJECT}:storage.lustre.availabilityZone: the jobs' EFA or reserved pools run in different "
                            "zones (p5-efa in use1-az4, p5-efa-b in use1-az6)"), error
    assert "Fix: run the jobs of this stack on EFA or reserved pools of one zone" in error


def registered_types_until_refused(monkeypatch, stack: str, raw: dict) -> tuple[str, list[str]]:
    """(the refusal, the type of every resource registered before it) of the plan of `stack` with
    the storage section of `raw`."""
    from offline import plan

    registered: list[str] = []
    register = plan._RecordingMonitor.RegisterResource

    def recording(self, request):
        registered.append(request.type)
        return register(self, request)

    monkeypatch.setattr(plan._RecordingMonitor, "RegisterResource", recording)
    with pytest.raises(ConfigError) as refused:
        plan.synthesize(stack, overrides={"storage": raw[f"{PROJECT}:storage"]})
    return str(refused.value), [t for t in registered if t != "pulumi:pulumi:Stack"]


@pytest.mark.parametrize(("stack", "zone", "expected"), [
    # The p5 pool's use1-az4 is us-east-1a in the offline account: the name of another zone is refused...
    ("prod", "us-east-1b", "us-east-1b is not the zone of pool p5-efa, use1-az4 (use1-az4 is us-east-1a in this account)"),
    # ... and an AZ ID whose zone has no subnet in the network (dev: us-east-1a and b).
    ("dev", "use1-az2", "AZ ID use1-az2 is us-east-1d in this account, where the network has no subnet"),
])
def test_the_program_refuses_a_lustre_zone_only_the_account_can_judge_before_any_resource(monkeypatch, stack, zone,
                                                                                            expected):
    raw = mutate(raw_config(stack) if stack == "prod" else with_lustre(), "storage.lustre.availabilityZone", zone)
    load(raw, stack)  # the config alone cannot tell
    message, registered = registered_types_until_refused(monkeypatch, stack, raw)
    assert f"{PROJECT}:storage.lustre.availabilityZone: " in message and expected in message, message
    assert registered == ["pulumi:providers:aws"], "nothing but the provider (which creates nothing) exists yet"


def prod_job(raw=None, **changes):
    raw = raw or raw_config("prod")
    job = {**raw[f"{PROJECT}:training"]["jobs"][0], **changes}
    return mutate(raw, "training.jobs", [job])


def test_grace_period_shorter_than_the_flush_is_rejected_naming_both_numbers():
    (error,) = errors_of(prod_job(terminationGracePeriodSeconds=100, checkpointWriters="rank0"))
    assert error.startswith(f"{PROJECT}:training.jobs[0].terminationGracePeriodSeconds: ")
    assert "(got 100)" in error and "80 GiB checkpoint on FSx for Lustre at 732 MB/s" in error
    assert "rank 0 writing one file: 1 x 80 GiB striped over 5 of 22 OSTs" in error and "265 s are needed" in error
    assert "at least 265" in error and "checkpointWriters: allRanks" in error
    assert "at 125 MB/s per TiB no capacity writes 1 file(s) fast enough" in error, \
        "one file reaches 5 OSTs: a larger file system does not help"


def test_the_grace_period_follows_the_storage_and_the_writers():
    at_12000 = prod_at_12000()
    load(prod_job(at_12000, terminationGracePeriodSeconds=265, checkpointWriters="rank0"))  # exactly enough
    (error,) = errors_of(prod_job(at_12000, terminationGracePeriodSeconds=264, checkpointWriters="rank0"))
    assert "at least 265" in error
    load(prod_job(at_12000, terminationGracePeriodSeconds=148))  # allRanks, 16 files: all 10 OSTs
    smaller = mutate(mutate(prod_job(at_12000, terminationGracePeriodSeconds=148), "storage.lustre.storageCapacityGiB",
                            4800), "storage.lustre.readMBpsPerGpu", 10)
    (error,) = errors_of(smaller)
    assert "at 586 MB/s" in error and "at least 324" in error
    assert "storage.lustre.storageCapacityGiB: 12000 at 125 MB/s per TiB" in error, "the smallest that fits 148 s"
    measured = mutate(prod_job(at_12000, terminationGracePeriodSeconds=148, checkpointWriters="rank0"),
                      "storage.checkpointWriteMBps", 4000)
    load(measured)  # measured faster than documented: enough
    measured_slow = mutate(prod_job(at_12000, checkpointWriters="rank0"), "storage.checkpointWriteMBps", 500)
    (error,) = errors_of(measured_slow)
    assert "at 500 MB/s (storage.checkpointWriteMBps, as measured)" in error


# ----------------------------------------------------------------------------- sizing

def demand(read_mb_s, *checkpoints):
    return file_systems.LustreDemand(read_mb_s, tuple(file_systems.CheckpointDemand("job", *c) for c in checkpoints))


# (read MB/s, checkpoints as (GiB, files, grace s), throughput per TiB, smallest capacity or None)
MINIMUM_CAPACITIES = [
    (3200, (), 125, 26400),  # prod: 32 GPUs x 100 MB/s; 25.8 TiB gives 3,223 MB/s
    (3200, (), 500, 7200),
    (3200, (), 1000, 4800),
    (1464, (), 125, 12000),  # the old prod file system: 1,464.8 MB/s
    (100, (), 125, 1200),  # the smallest there is
    (100, ((80, 1, 270),), 125, 7200),  # one file on 5 of 6 OSTs: 732 MB/s, as on any larger file system
    (100, ((80, 1, 264),), 125, None),  # one file never gets past 5 OSTs x their share
    (100, ((80, 1, 264),), 250, 4800),
    (100, ((80, 16, 148),), 125, 12000),  # 16 files: every OST, so it grows with the capacity
    (100, ((80, 16, 84),), 125, 26400),  # prod's job on prod's file system
    (100, ((80, 16, 84), (80, 1, 265)), 125, 26400),  # every job's checkpoint must fit
]


@pytest.mark.parametrize(("read", "checkpoints", "per_tib", "expected"), MINIMUM_CAPACITIES)
def test_minimum_capacity_table(read, checkpoints, per_tib, expected):
    wanted = demand(read, *checkpoints)
    found = file_systems.lustre_minimum_capacity(wanted, per_tib)
    assert found == expected
    if found is not None:
        assert wanted.met_by(found, per_tib) and file_systems.lustre_capacity_problem(found) is None
        smaller = [c for c in file_systems.lustre_capacities(found) if c < found]
        assert not any(wanted.met_by(c, per_tib) for c in smaller), "the smallest"


@pytest.mark.parametrize(("read", "checkpoints", "capacity", "expected"), [
    (3200, (), 12000, 500),  # the old prod capacity would need 500 MB/s per TiB for 32 GPUs x 100
    (1464, (), 12000, 125),
    (3200, (), 2400, None),  # 2.3 TiB x 1000 = 2,344 MB/s at most
    (100, ((80, 1, 264),), 12000, 250),
])
def test_minimum_throughput_table(read, checkpoints, capacity, expected):
    assert file_systems.lustre_minimum_throughput(demand(read, *checkpoints), capacity) == expected


def test_a_file_system_slower_than_its_gpus_read_is_refused_with_both_ways_out():
    raw = mutate(raw_config("prod"), "storage.lustre.storageCapacityGiB", 12000)
    (error,) = errors_of(raw)
    assert error.startswith(f"{PROJECT}:storage.lustre.storageCapacityGiB: 12000 GiB x 125 MB/s per TiB gives 1465 MB/s, "
                            "less than the 32 GPUs its jobs can run at once (training.gpuQuota) x readMBpsPerGpu 100 = "
                            "3200 MB/s"), error
    assert "(got 12000)" in error
    assert "Fix: set storageCapacityGiB: 26400 (at 125 MB/s per TiB), or throughputPerTiB: 500 (at 12000 GiB)" in error


@pytest.mark.parametrize(("quota", "per_gpu", "accepted"), [
    ({"p5-efa": 16, "gpu-spot": 16}, 45, True),  # 32 GPUs x 45 = 1440 <= 1465
    ({"p5-efa": 16, "gpu-spot": 16}, 46, False),  # 1472
    ({"p5-efa": 16, "gpu-spot": 0}, 91, True),  # 16 GPUs: the spot quota reads nothing
    ({"p5-efa": 16, "gpu-spot": 0}, 92, False),
])
def test_the_read_demand_is_the_queues_gpus_times_the_target(quota, per_gpu, accepted):
    raw = mutate(mutate(prod_at_12000(), "storage.lustre.readMBpsPerGpu", per_gpu), "training.gpuQuota", quota)
    if accepted:
        load(raw)
    else:
        assert any("storage.lustre.storageCapacityGiB" in e for e in errors_of(raw))


def test_make_cost_states_the_read_rate_per_gpu_and_each_checkpoint_write_time():
    from offline.cost import storage_lines

    lines = storage_lines(load(raw_config("prod")))
    assert any("26400 GiB x 125 MB/s per TiB = 3,223 MB/s for the 32 GPUs of training.gpuQuota: 101 MB/s per GPU "
               "(readMBpsPerGpu 100)" in line for line in lines), lines
    (job,) = [line for line in lines if "pretrain-p5" in line]
    assert "80 GiB on FSx for Lustre at 3,223 MB/s: 27 s; a stop needs 84 s of its 270 s grace" in job, job
    assert "every rank writing its own file: 16 x 5 GiB striped over 22 of 22 OSTs" in job, job


@pytest.mark.parametrize("stack", ["prod", "team-vision-prod"])
def test_a_prod_job_must_state_its_checkpoint_size(stack):
    raw = raw_config(stack)
    job = {k: v for k, v in raw[f"{PROJECT}:training"]["jobs"][0].items() if k != "checkpointGiB"}
    (error,) = errors_of(mutate(raw, "training.jobs", [job]), stack)
    assert error.startswith(f"{PROJECT}:training.jobs[0].checkpointGiB: required key is missing: a prod stack")
    assert "Fix: set checkpointGiB" in error


def test_outside_prod_a_job_without_a_checkpoint_size_is_not_checked():
    raw = raw_config("dev")
    job = {**raw[f"{PROJECT}:training"]["jobs"][0], "terminationGracePeriodSeconds": 30}
    assert "checkpointGiB" not in job
    assert load(mutate(raw, "training.jobs", [job]), "dev").training.jobs[0].checkpoint_gib is None


@pytest.mark.parametrize(("writers", "expected"), [
    (None, ("100 GiB checkpoint on EFS at 524 MB/s (EFS Elastic, rank 0 writing", "440 s are needed")),
    ("allRanks", ("100 GiB checkpoint on EFS at 1049 MB/s (EFS Elastic, every rank writing", "235 s are needed")),
])
def test_team_jobs_are_checked_against_efs(writers, expected):
    """The team's job runs on spot: at most 100 s of grace, which neither write fits."""
    raw = raw_config("team-vision-prod")
    job = {**raw[f"{PROJECT}:training"]["jobs"][0], "checkpointGiB": 100, "terminationGracePeriodSeconds": 100}
    if writers:
        job["checkpointWriters"] = writers
    errors = errors_of(mutate(raw, "training.jobs", [job]), "team-vision-prod")
    assert any(all(text in e for text in expected) for e in errors), errors


@pytest.mark.parametrize("value", ["rank-0", "all", "allranks", "", True, 0])
def test_checkpoint_writers_must_be_rank0_or_all_ranks(value):
    (error,) = errors_of(prod_job(checkpointWriters=value))
    assert error.startswith(f"{PROJECT}:training.jobs[0].checkpointWriters: ") and "Fix:" in error, error
    assert "rank0, allRanks" in error or "must be a string" in error, error


# (store, nodes, ranks, writers, checkpoint GiB, MB/s, grace period needed)
CHECKPOINT_STORES = [
    # The review's case: 4 nodes, 20 GiB. All nodes writing: 1 GiBps; rank 0 alone: one client's 500 MiBps.
    ("efs", 4, 32, "rank0", 20, 524.29, 112),
    ("efs", 4, 32, "allRanks", 20, 1073.74, 70),
    ("efs", 1, 8, "allRanks", 20, 524.29, 112),
    # prod's file system: 12000 GiB = 10 OSTs of 1200 GiB; one file of more than 1 GiB spans 5 of them.
    ("lustre", 2, 16, "rank0", 80, 732.42, 265),
    ("lustre", 2, 16, "allRanks", 80, 1464.84, 148),
    ("lustre", 1, 1, "allRanks", 80, 732.42, 265),  # one rank: one file whatever the setting
    ("lustre", 1, 1, "rank0", 0.5, 146.48, 38),  # under 1 GiB: one stripe, one OST
]


@pytest.mark.parametrize(("store", "nodes", "ranks", "writers", "gib", "mb_s", "grace"), CHECKPOINT_STORES)
def test_checkpoint_write_rate_and_grace_period_table(store, nodes, ranks, writers, gib, mb_s, grace):
    storage = load(prod_at_12000()).storage
    assert isinstance(storage, StorageConfig)
    found = storage.checkpoint_store(nodes=nodes, ranks=ranks, writers=writers, checkpoint_gib=gib,
                                     lustre=store == "lustre")
    assert found.name == ("FSx for Lustre" if store == "lustre" else "EFS")
    assert found.write_mb_s == pytest.approx(mb_s, abs=0.01)
    assert file_systems.grace_needed_seconds(gib, found.write_mb_s) == grace


@pytest.mark.parametrize(("capacity", "per_tib", "files", "file_gib", "mb_s"), [
    (1200, 125, 1, 80, 146.48),  # one OST: the whole file system
    (12000, 125, 1, 80, 732.42),  # 5 of 10 OSTs
    (12000, 125, 16, 5, 1464.84),  # every OST
    (12000, 125, 1, 0.5, 146.48),  # a small file: one stripe
    (4800, 500, 2, 40, 2343.75),  # 4 OSTs, 10 stripes wanted: all 4
    (100800, 1000, 1, 80, 3125.0),  # 5 stripes x one 5 Gbps flow each, below 5/84 of 98 GB/s
])
def test_lustre_write_rate_table(capacity, per_tib, files, file_gib, mb_s):
    assert file_systems.lustre_write_mb_s(capacity, per_tib, files=files, file_gib=file_gib) == pytest.approx(mb_s, abs=0.01)


# ------------------------------------------------------------------------------- plan


def manifest(plan, kind, name) -> dict:
    (found,) = [m for m in plan.manifests() if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


def test_prod_file_system_is_encrypted_persistent_and_in_the_gpu_zone(plan_of):
    plan = plan_of("prod")
    (fs,) = plan.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    inputs = fs["inputs"]
    assert inputs["kmsKeyId"] == f"arn:aws:mock:us-east-1:{ACCOUNT}:key/lustre-key"
    keys = inputs_by_name(plan, "aws:kms/key:Key")
    assert keys["lustre-key"]["enableKeyRotation"] is True
    assert inputs_by_name(plan, "aws:kms/alias:Alias")["lustre-key"]["name"] == "alias/gpu-training-prod-lustre"
    assert (inputs["deploymentType"], inputs["storageType"], inputs["storageCapacity"], inputs["perUnitStorageThroughput"]) == (
        "PERSISTENT_2", "SSD", 26400, 125)
    assert inputs["fileSystemTypeVersion"] == "2.15" and inputs["metadataConfiguration"] == {"mode": "AUTOMATIC"}
    assert inputs["subnetIds"] == "network-private-us-east-1a-id", "one private subnet, the p5 pool's zone"
    assert inputs["securityGroupIds"] == [LUSTRE_SG]
    p5 = next(r["inputs"] for r in plan.of_type("aws:eks/nodeGroup:NodeGroup") if "p5-efa" in r["name"])
    assert inputs["subnetIds"] in p5["subnetIds"]


def test_prod_links_the_datasets_bucket_read_only(plan_of):
    plan = plan_of("prod")
    # (prod, a MultiKueue manager, also links its checkpoint directory: tests/test_multikueue.py)
    (association,) = [a for a in plan.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
                      if a["inputs"]["fileSystemPath"] == "/_datasets"]
    inputs = association["inputs"]
    assert inputs["fileSystemId"] == "lustre-fs-id"
    assert inputs["dataRepositoryPath"] == f"s3://gpu-training-prod-datasets-{ACCOUNT}/"
    assert inputs["s3"] == {"autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}, "import only, no export"
    assert inputs["deleteDataInFilesystem"] is False


def test_the_data_key_lets_only_fsx_read_only_the_datasets_bucket(plan_of):
    for stack in PLATFORM_STACKS:
        policy = json.loads(inputs_by_name(plan_of(stack), "aws:kms/key:Key")["storage-buckets-data-key"]["policy"])
        fsx = [s for s in policy["Statement"] if s.get("Sid") == "FsxForLustreReadsTheDatasetsBucket"]
        assert len(fsx) == (stack in ("prod", "prod-usw2", "prod-use2")), stack
    policy = json.loads(inputs_by_name(plan_of("prod"), "aws:kms/key:Key")["storage-buckets-data-key"]["policy"])
    (statement,) = [s for s in policy["Statement"] if s.get("Sid") == "FsxForLustreReadsTheDatasetsBucket"]
    condition = statement["Condition"]
    assert condition["ArnLike"]["aws:PrincipalArn"] == (
        f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*")
    assert condition["StringEquals"] == {"kms:CallerAccount": ACCOUNT, "kms:ViaService": "s3.us-east-1.amazonaws.com"}
    # The datasets bucket, and (MultiKueue: Lustre exports checkpoints there) the artifacts bucket.
    assert condition["StringLike"] == {"kms:EncryptionContext:aws:s3:arn": [
        f"arn:aws:s3:::gpu-training-prod-{purpose}-{ACCOUNT}" for purpose in ("datasets", "artifacts")]}
    assert "kms:*" not in statement["Action"] and "kms:CreateGrant" not in statement["Action"]


def test_lustre_security_group_opens_only_lnet_from_nodes_and_itself(plan_of):
    plan = plan_of("prod")
    groups = inputs_by_name(plan, "aws:ec2/securityGroup:SecurityGroup")
    assert groups["security-groups-lustre"]["name"] == "gpu-training-prod-lustre"
    rules = [(t, r) for t in (INGRESS, EGRESS) for r in plan.of_type(t)]
    lustre_rules = [(t, r["inputs"]) for t, r in rules if r["inputs"]["securityGroupId"] == LUSTRE_SG]
    assert {(t == INGRESS, i["fromPort"], i["toPort"], i["referencedSecurityGroupId"]) for t, i in lustre_rules} == {
        (direction, first, last, peer)
        for direction in (True, False) for first, last in ((988, 988), (1018, 1023)) for peer in (NODES_SG, LUSTRE_SG)}
    assert all(i["ipProtocol"] == "tcp" and "cidrIpv4" not in i for _, i in lustre_rules), "no CIDR, no other protocol"
    from_lustre = [r["inputs"] for t, r in rules if r["inputs"].get("referencedSecurityGroupId") == LUSTRE_SG
                   and r["inputs"]["securityGroupId"] != LUSTRE_SG]
    assert sorted((i["securityGroupId"], i["fromPort"], i["toPort"]) for i in from_lustre) == [
        (NODES_SG, 988, 988), (NODES_SG, 1018, 1023)]
    for stack in ("dev", "staging"):
        assert "security-groups-lustre" not in inputs_by_name(plan_of(stack), "aws:ec2/securityGroup:SecurityGroup")


def test_prod_volumes_are_static_fsx_volumes(plan_of):
    plan = plan_of("prod")
    addons = {a["addonName"]: a for a in inputs_by_name(plan, "aws:eks/addon:Addon").values()}
    fsx_addon = addons["aws-fsx-csi-driver"]
    (cluster,) = plan.of_type("aws:eks/cluster:Cluster")
    assert fsx_addon["addonVersion"] == ADDON_VERSIONS[cluster["inputs"]["version"]]["aws-fsx-csi-driver"]
    assert "podIdentityAssociations" not in fsx_addon, "static volumes need no FSx API access"
    dns = "lustre-fs-id.fsx.offline.amazonaws.com"
    # ReadWriteMany both: the FSx driver refuses ReadOnlyMany (MULTI_NODE_READER_ONLY); the datasets
    # are read-only through the `ro` mount option and the pods' readOnly.
    expected = {"checkpoints": ("offline1", ["flock"]), "datasets": ("offline1/_datasets", ["flock", "ro"])}
    for volume, (mount_name, options) in expected.items():
        pv = manifest(plan, "PersistentVolume", f"{volume}-training-prod")["spec"]
        assert pv["csi"] == {"driver": "fsx.csi.aws.com", "volumeHandle": f"lustre-fs-id::{volume}",
                             "volumeAttributes": {"dnsname": dns, "mountname": mount_name}}
        assert pv["accessModes"] == ["ReadWriteMany"] and pv["storageClassName"] == "" and pv["mountOptions"] == options
        assert pv["claimRef"] == {"namespace": "training-prod", "name": volume}
        assert pv["persistentVolumeReclaimPolicy"] == "Retain"
        pvc = manifest(plan, "PersistentVolumeClaim", volume)
        assert pvc["spec"]["volumeName"] == f"{volume}-training-prod" and pvc["spec"]["storageClassName"] == ""
        assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert manifest(plan, "StorageClass", "efs-static")["provisioner"] == "efs.csi.aws.com", "team stacks still use EFS"


def test_prod_jobs_mount_the_lustre_volumes(plan_of):
    plan = plan_of("prod")
    claims_on_lustre = {m["metadata"]["name"] for m in plan.manifests() if m["kind"] == "PersistentVolumeClaim"
                        and manifest(plan, "PersistentVolume", m["spec"]["volumeName"])["spec"]["csi"]["driver"]
                        == "fsx.csi.aws.com"}
    assert claims_on_lustre == {"checkpoints", "datasets"}
    jobsets = [m for m in plan.manifests() if m["kind"] == "JobSet"]
    assert jobsets
    for jobset in jobsets:
        (replicated,) = jobset["spec"]["replicatedJobs"]
        pod = replicated["template"]["spec"]["template"]["spec"]
        claims = {v["name"]: v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
        assert claims == {"checkpoints": {"claimName": "checkpoints", "readOnly": False},
                          "datasets": {"claimName": "datasets", "readOnly": True}}
        (container,) = pod["containers"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts["checkpoints"] == "/workspace/checkpoints" and mounts["datasets"] == "/workspace/data"
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["TRAIN_CHECKPOINT_DIR"].startswith("/workspace/checkpoints/")
        assert pod["terminationGracePeriodSeconds"] >= file_systems.grace_needed_seconds(80, 732.42), \
            "even a trainer that writes from rank 0 alone stops cleanly"


def pod_specs(manifest_: dict) -> list[dict]:
    """Every pod spec in a manifest (JobSet, CronJob, ...), wherever it is nested."""
    found, stack = [], [manifest_]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if "containers" in value and "volumes" in value:
                found.append(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


def checkpoint_mounts(plan) -> list[tuple[str, dict]]:
    """(object, volumeMount) of every container that mounts the `checkpoints` claim."""
    mounts = []
    for m in plan.manifests():
        for pod in pod_specs(m):
            names = {v["name"] for v in pod["volumes"]
                     if v.get("persistentVolumeClaim", {}).get("claimName") == "checkpoints"}
            mounts += [(f"{m['kind']} {m['metadata']['name']}", mount) for c in pod.get("initContainers", []) + pod["containers"]
                       for mount in c.get("volumeMounts", []) if mount["name"] in names]
    return mounts


def test_no_pod_can_write_the_linked_datasets_through_its_checkpoint_mount(plan_of):
    """The checkpoint volume is the file system's root, with the datasets at /_datasets: every pod
    mounts only the checkpoints directory beside them."""
    from components.data.lustre import CHECKPOINTS_DIR, DATASETS_PATH

    assert not DATASETS_PATH.lstrip("/").startswith(CHECKPOINTS_DIR.rstrip("/") + "/")
    # The file system's two links, side by side: the datasets (import only) and, prod being a
    # MultiKueue manager, the checkpoints directory itself (both ways, to the artifacts bucket).
    # Neither lies inside the other, so a pod's checkpoints subPath reaches the checkpoints link only.
    associations = plan_of("prod").of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert sorted(a["inputs"]["fileSystemPath"] for a in associations) == [DATASETS_PATH, f"/{CHECKPOINTS_DIR}"]
    pv = manifest(plan_of("prod"), "PersistentVolume", "checkpoints-training-prod")["spec"]
    assert pv["csi"]["volumeAttributes"]["mountname"] == "offline1", "the root: the kubelet makes the subPath in it"
    mounts = checkpoint_mounts(plan_of("prod"))
    assert {owner.split()[0] for owner, _ in mounts} == {"JobSet", "CronJob", "Job", "Deployment"}, mounts
    for owner, mount in mounts:
        if owner == "Job checkpoint-directory":
            continue  # the one exception, below
        assert mount.get("subPath") == "checkpoints" and mount["mountPath"] == "/workspace/checkpoints", owner
    # The TensorBoard viewer (workload/viewer.py) only reads the event files beside the checkpoints.
    assert [mount.get("readOnly") for owner, mount in mounts if owner.startswith("Deployment")] == [True]
    # The one pod that mounts the root: the Job that makes the checkpoints directory in it
    # (workload/checkpoint_directory.py), running the module's fixed script and nothing else.
    from components.workload import checkpoint_directory

    (job,) = [m for m in plan_of("prod").manifests() if m["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][:3] == ["python", "-c", checkpoint_directory.SCRIPT]
    assert container["command"][3] == f"{checkpoint_directory.ROOT_MOUNT}/{CHECKPOINTS_DIR}"
    for stack in ("dev", "team-vision-prod"):  # EFS: the access point is already the workload's own directory
        assert all("subPath" not in mount for _, mount in checkpoint_mounts(plan_of(stack))), stack


def test_team_stacks_on_a_lustre_platform_keep_efs(plan_of):
    """The team's volumes, which its (Lustre) platform makes (workload/team_volumes.py), are EFS and S3."""
    drivers = {m["spec"]["csi"]["driver"] for m in plan_of("prod").manifests()
               if m["kind"] == "PersistentVolume" and m["spec"]["claimRef"]["namespace"] == "team-vision"}
    assert drivers == {"efs.csi.aws.com", "s3.csi.aws.com"}


# Each CSI driver's supported access modes, as the API oracle (tests/api_limits.py) knows them.
ACCESS_MODES = [
    ("fsx.csi.aws.com", "ReadWriteMany", True), ("fsx.csi.aws.com", "ReadWriteOnce", True),
    ("fsx.csi.aws.com", "ReadOnlyMany", False),
    ("efs.csi.aws.com", "ReadWriteMany", True), ("efs.csi.aws.com", "ReadWriteOnce", True),
    ("efs.csi.aws.com", "ReadOnlyMany", False),
    ("s3.csi.aws.com", "ReadWriteMany", True), ("s3.csi.aws.com", "ReadOnlyMany", True),
    ("s3.csi.aws.com", "ReadWriteOnce", False),
]


@pytest.mark.parametrize(("driver", "mode", "mounts"), ACCESS_MODES)
def test_the_oracle_knows_which_access_modes_each_csi_driver_mounts(driver, mode, mounts):
    problems = api_limits.volume_mode_problems({"accessModes": [mode], "csi": {"driver": driver}})
    assert (problems == []) is mounts, problems


def test_the_oracle_refuses_the_read_only_many_lustre_volume_and_an_unbindable_claim(plan_of):
    """The datasets volume as it was (ReadOnlyMany on the FSx driver) never mounts; a claim asking for
    a mode its volume lacks never binds; a driver the oracle has no table for is not waved through."""
    plan = copy.deepcopy(plan_of("prod"))
    assert api_limits.violations(plan, "us-east-1") == []
    datasets = manifest(plan, "PersistentVolume", "datasets-training-prod")
    datasets["spec"]["accessModes"] = ["ReadOnlyMany"]
    checkpoints = manifest(plan, "PersistentVolume", "checkpoints-training-prod")
    checkpoints["spec"]["csi"]["driver"] = "example.csi.vendor.io"
    found = "\n".join(api_limits.violations(plan, "us-east-1"))
    assert "PersistentVolume datasets-training-prod: access mode ReadOnlyMany is CSI MULTI_NODE_READER_ONLY, which " \
           "fsx.csi.aws.com does not support" in found, found
    assert "PersistentVolumeClaim datasets: access modes ['ReadWriteMany'] are not all offered" in found, found
    assert "'example.csi.vendor.io' has no access-mode table" in found, found

