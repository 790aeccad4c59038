"""Limits the configuration can exceed, refused before any resource exists: rules per security group
and the other AWS / Kueue quotas the config drives, GPU quota owned by several queues of one pool,
VPC ranges shared between environments, secret values with surrounding whitespace."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from crd_schemas import validate_custom_resource
from plan_queries import config_errors
from stack_configs import PLATFORM_STACKS, PROJECT, ROOT, mutate, raw_config

from components.config import ConfigError, StackConfig, TeamStackConfig, load_stack_config
from components.config.multikueue import api_peer_cidrs
from components.config.node_pools import NodePoolConfig
from components.config.platform_contract import CONTRACT_OUTPUT, platform_of_contract, read_contract
from components.config.secrets import surrounding_whitespace
from components.config.service_quotas import RuleCount, security_group_rules
from components.config.sibling_stacks import sibling_vpc_cidrs
from components.config.stack import ENVIRONMENTS, stack_kind
from components.config.training import overcommitted_pools
from components.config.vocabularies import Capacity
from offline.plan import Plan, planned_config, synthesize

TEAM_STACK = "team-vision-prod"
RULE_TYPES = {"aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "inbound",
              "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "outbound"}
GROUP_RESOURCE_PREFIXES = ("security-groups-", "ci-runner-")


def problems_of(raw, stack="dev", **kwargs) -> list[str]:
    return config_errors(raw, stack, **kwargs)


# --- rules per security group -------------------------------------------------------------------

def planned_rules(plan: Plan) -> dict[str, RuleCount]:
    """Group role -> the rules the plan creates on it (each rule names its group's id: `<group resource>-id`)."""
    roles = {}
    for group in plan.of_type("aws:ec2/securityGroup:SecurityGroup"):
        name = group["name"]
        prefix = next(p for p in GROUP_RESOURCE_PREFIXES if name.startswith(p))
        roles[f"{name}-id"] = "ci-runner" if prefix == "ci-runner-" else name.removeprefix(prefix)
    counted: Counter[tuple[str, str]] = Counter()
    for resource in plan.resources:
        if resource["type"] in RULE_TYPES:
            counted[roles[resource["inputs"]["securityGroupId"]], RULE_TYPES[resource["type"]]] += 1
    return {role: RuleCount(counted[role, "inbound"], counted[role, "outbound"]) for role in roles.values()}


def computed_rules(config: StackConfig) -> dict[str, RuleCount]:
    counts = security_group_rules(config.network, config.fabric, config.node_pools, lustre=config.storage.lustre is not None,
                                  viewer=config.viewer, api_peer_cidrs=api_peer_cidrs(config.multikueue))
    return {role: RuleCount(count.inbound, count.outbound) for role, count in counts.items()}


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_the_rule_count_is_the_plans(stack, plan_of):
    config = planned_config(stack)
    assert isinstance(config, StackConfig)
    assert computed_rules(config) == planned_rules(plan_of(stack))


def big_network(cidrs: int, ports: int) -> dict:
    network = raw_config("prod")[f"{PROJECT}:network"]
    return {**network, "monitoringIngress": {"cidrs": [f"10.100.{i}.0/24" for i in range(cidrs)],
                                             "ports": [9100 + i for i in range(ports)]}}


def test_the_rule_count_is_the_plans_for_a_big_config():
    """prod (every kind of group: EFA and socket fabric, Lustre) with 20 collector CIDRs x 5 ports
    and 8 rendezvous ports, on an account whose quota was raised to 200."""
    overrides = {"network": big_network(20, 5), "serviceQuotas": {"securityGroupRules": 200},
                 "fabric": {"rendezvousPorts": list(range(29400, 29408)), "ncclPortRange": {"first": 50000, "last": 51999}}}
    plan = synthesize("prod", overrides=overrides)
    config = planned_config("prod", raw=mutate(mutate(mutate(raw_config("prod"), "network", overrides["network"]),
                                                      "serviceQuotas", overrides["serviceQuotas"]),
                                               "fabric", overrides["fabric"]))
    assert isinstance(config, StackConfig)
    planned = planned_rules(plan)
    assert computed_rules(config) == planned
    # + 12: 7 control plane ports, 2 DNS, 2 Lustre, the viewer's port from its load balancer.
    assert planned["nodes"].inbound == 20 * 5 + 12 and planned["socket-fabric"].inbound == 9
    # The viewer's load balancer: its one listener port (no certificate) from each of the 20 CIDRs.
    assert planned["viewer-alb"] == RuleCount(inbound=20, outbound=1)


def pools_like_gpu_spot(count: int) -> list[dict]:
    system, gpu_spot = raw_config("dev")[f"{PROJECT}:nodePools"]
    return [system, gpu_spot, *({**gpu_spot, "name": f"gpu-{i}"} for i in range(count - 2))]


@pytest.mark.parametrize(
    ("case", "changes", "expected"),
    [
        # 20 x 20 on prod: the finding (7 control plane + 2 DNS + 2 Lustre + the viewer's 1 + 400).
        ("finding", [("network", big_network(20, 20))],
         "gpu-training:network.monitoringIngress.cidrs: gives the security group nodes 412 inbound rules "
         "(network.monitoringIngress.cidrs x network.monitoringIngress.ports), over the 60 per group"),
        ("just-over", [("network", big_network(7, 7))], "gives the security group nodes 61 inbound rules"),
        ("rendezvous-ports", [("fabric.rendezvousPorts", list(range(29400, 29460)))],
         "gpu-training:fabric.rendezvousPorts: gives the security group socket-fabric 61 inbound rules"),
        ("raised-too-little", [("network", big_network(20, 20)), ("serviceQuotas", {"securityGroupRules": 400})],
         "over the 400 per group"),
        ("quota-beyond-aws-cap", [("serviceQuotas", {"securityGroupRules": 1001})],
         "gpu-training:serviceQuotas.securityGroupRules: must be between 60 and 1000"),
        ("quota-typo", [("serviceQuotas", {"securityGroupRule": 100})], "gpu-training:serviceQuotas.securityGroupRule: unknown key"),
        # 600 rules per group leaves an account 1 group per interface (1,000 / 600); GPU nodes carry 2.
        ("rules-times-groups", [("serviceQuotas", {"securityGroupRules": 600})],
         "gpu-training:serviceQuotas.securityGroupRules: times the 2 security groups on each network interface of "
         "pool gpu-spot's nodes (nodes, socket-fabric) is 1200, over the 1000 AWS allows"),
        ("node-groups", [("nodePools", pools_like_gpu_spot(31))],
         "gpu-training:nodePools: makes 31 managed node groups, over the 30 per cluster"),
        ("nodes-per-group", [("nodePools", [raw_config("prod")[f"{PROJECT}:nodePools"][0] | {"size": {"min": 3, "desired": 3, "max": 451}},
                                            *raw_config("prod")[f"{PROJECT}:nodePools"][1:]])],
         "gpu-training:nodePools[0].size.max: is over the 450 nodes per managed node group"),
        ("public-access-cidrs", [("cluster.publicAccessCidrs", [f"198.51.{i}.0/24" for i in range(41)])],
         "gpu-training:cluster.publicAccessCidrs: lists 41 ranges; EKS takes at most 40 per cluster"),
    ],
)
def test_quotas_the_config_exceeds_are_refused(case, changes, expected):
    stack = "dev" if case in ("node-groups", "public-access-cidrs", "rendezvous-ports", "quota-beyond-aws-cap",
                              "quota-typo", "rules-times-groups") else "prod"
    raw = raw_config(stack)
    for path, value in changes:
        raw = mutate(raw, path, value)
    found = problems_of(raw, stack)
    assert any(expected in problem for problem in found), found


def test_an_over_quota_group_is_said_beside_another_network_problem():
    """The rule count reads only monitoringIngress: an overlapping vpcCidr must not hide it until the next run."""
    raw = mutate(raw_config("staging"), "network", big_network(20, 20) | {"vpcCidr": "10.30.0.0/16"})
    found = problems_of(raw, "staging")
    assert any("network.vpcCidr: overlaps the VPC CIDR 10.30.0.0/16 of stack 'prod'" in p for p in found), found
    assert any("network.monitoringIngress.cidrs: gives the security group nodes" in p for p in found), found


@pytest.mark.parametrize(
    ("changes", "stack"),
    [
        ([("network", big_network(10, 4))], "prod"),  # 40 + 12 = 52 rules: within the default
        ([("network", big_network(20, 20)), ("serviceQuotas", {"securityGroupRules": 500})], "prod"),
        ([("nodePools", pools_like_gpu_spot(31)), ("serviceQuotas", {"managedNodeGroupsPerCluster": 40})], "dev"),
    ],
)
def test_a_declared_quota_lets_the_config_pass(changes, stack):
    raw = raw_config(stack)
    for path, value in changes:
        raw = mutate(raw, path, value)
    assert problems_of(raw, stack) == []


def test_a_team_stack_declares_no_quota():
    assert any(p.startswith("gpu-training:serviceQuotas: belongs to the platform stack")
               for p in problems_of(mutate(raw_config(TEAM_STACK), "serviceQuotas", {"securityGroupRules": 100}),
                                    TEAM_STACK))


# --- GPU quota owned by several queues of one pool ----------------------------------------------

INSTANCE_WITH_GPUS = {8: "p5.48xlarge", 1: "g6.2xlarge", 0: "m7i.xlarge"}


def gpu_pool(name: str, max_size: int, gpus_per_node: int) -> NodePoolConfig:
    pool = NodePoolConfig(name=name, instance_types=(INSTANCE_WITH_GPUS[gpus_per_node],), capacity=Capacity.ON_DEMAND,
                          gpu=gpus_per_node > 0, efa=False, min_size=0, desired_size=0, max_size=max_size,
                          availability_zones=("use1-az4",), root_volume_gib=200)
    assert pool.gpus_per_node == gpus_per_node
    return pool


@pytest.mark.parametrize(
    ("pools", "quotas", "expected"),
    [
        ([gpu_pool("p5", 2, 8)], [("prod", {"p5": 16}), ("team", {"p5": 1})], [("p5", 16, 17)]),
        ([gpu_pool("p5", 2, 8)], [("prod", {"p5": 8}), ("team", {"p5": 8})], []),  # exactly full
        ([gpu_pool("p5", 2, 8)], [("prod", {}), ("team", {"p5": 16})], []),
        ([gpu_pool("a", 1, 8), gpu_pool("b", 4, 1)], [("prod", {"a": 8, "b": 4}), ("t1", {"b": 1}), ("t2", {"a": 1})],
         [("a", 8, 9), ("b", 4, 5)]),
        ([gpu_pool("cpu", 4, 0)], [("prod", {"cpu": 1})], []),  # not a GPU pool: reported elsewhere
    ],
)
def test_overcommitted_pools(pools, quotas, expected):
    assert [(o.pool, o.capacity, o.owned) for o in overcommitted_pools(pools, quotas)] == expected


def load_team(raw, plan_of) -> TeamStackConfig:
    contract = read_contract(plan_of("prod").outputs[CONTRACT_OUTPUT], reference=f"organization/{PROJECT}/prod",
                             project=PROJECT)
    platform = platform_of_contract(contract, project=PROJECT, environment="prod")
    config = load_stack_config(raw, project=PROJECT, stack=TEAM_STACK, platform=platform)
    assert isinstance(config, TeamStackConfig)
    return config


def load_prod(raw):
    config = load_stack_config(raw, project=PROJECT, stack="prod", sibling_stacks_dir=None)
    assert isinstance(config, StackConfig)
    return config


def with_teams(*rows):
    return mutate(raw_config("prod"), "teams", list(rows))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # prod's own queue owns all 16 GPUs of the 2 reserved p5: the finding, now in the platform's own plan.
        (with_teams({"name": "vision", "gpuQuota": {"p5-efa": 16, "gpu-spot": 16}}),
         "gpu-training:teams[0].gpuQuota.p5-efa: brings the owned quota of pool p5-efa to 32 of its 16 GPUs "
         "(the platform's training.gpuQuota owns 16, team vision owns 16)"),
        # The platform owns the pool: the fix says to borrow it (gpuQuotaBorrowed), from the platform.
        (with_teams({"name": "vision", "gpuQuota": {"p5-efa": 1}}),
         "Fix: remove it, or let the team borrow the pool: gpuQuotaBorrowed: [p5-efa] in its row (the platform owns "
         "p5-efa: the team then runs on GPUs the platform leaves idle"),
        # Summed across every team: vision's 8 fit beside the platform's 16, nlp's 16 do not.
        (with_teams({"name": "vision", "gpuQuota": {"gpu-spot": 8}}, {"name": "nlp", "gpuQuota": {"gpu-spot": 16}}),
         "gpu-training:teams[1].gpuQuota.gpu-spot: brings the owned quota of pool gpu-spot to 40 of its 32 GPUs "
         "(the platform's training.gpuQuota owns 16, team vision owns 8, team nlp owns 16)"),
        (with_teams({"name": "vision", "gpuQuota": {"gpu-spot": 8}}, {"name": "nlp", "gpuQuota": {"gpu-spot": 16}}),
         "Fix: lower it to 8 or less"),
        (with_teams({"name": "vision", "gpuQuota": {"gpu-spot": 1000}}),
         "gpu-training:teams[0].gpuQuota.gpu-spot: exceeds pool gpu-spot's 32 GPUs"),
        (with_teams({"name": "vision", "gpuQuota": {"gpu-spot": 16}, "gpuQuotaBorrowed": ["p5-efa"]}),
         "gpu-training:teams[0].gpuQuotaBorrowed: is not a pool of this row's gpuQuota"),
        (with_teams({"name": "vision", "gpuQuota": {"gpu-spot": 16}, "gpuQuotaBorrowed": ["gpu-spot", "gpu-spot"]}),
         "gpu-training:teams[0].gpuQuotaBorrowed: lists a pool twice"),
        (with_teams({"name": "vision", "gpuQuota": {"gpu-spot": 16}, "gpuBorrowingLimit": {"gpu-spot": 1000}}),
         "gpu-training:teams[0].gpuBorrowingLimit.gpu-spot: with the quota of 16 allows 1016 GPUs, more than pool "
         "gpu-spot's 32"),
        (with_teams({"name": "vision", "gpuQuota": {"gpu-spot": 16}}, {"name": "vision", "gpuQuota": {"gpu-spot": 0}}),
         "gpu-training:teams: names a team twice"),
        (with_teams({"name": "Vision!", "gpuQuota": {"gpu-spot": 16}}), "gpu-training:teams[0].name: is not a team name"),
        # A borrowed pool no other queue owns: the team's jobs would never be admitted.
        (mutate(with_teams({"name": "vision", "gpuQuota": {"gpu-spot": 8}, "gpuQuotaBorrowed": ["gpu-spot"]}),
                "training", {"gpuQuota": {"p5-efa": 16}, "jobs": []}),
         "gpu-training:teams[0].gpuQuotaBorrowed: borrows pool gpu-spot, which no other queue of the cohort owns"),
    ],
)
def test_the_platform_sums_every_teams_owned_quota_with_its_own(raw, expected):
    with pytest.raises(ConfigError) as raised:
        load_prod(raw)
    assert any(expected in problem for problem in raised.value.errors), raised.value.errors


def test_a_team_stack_sets_no_quota_of_its_own(plan_of):
    training = {**raw_config(TEAM_STACK)[f"{PROJECT}:training"], "gpuQuota": {"gpu-spot": 16}}
    with pytest.raises(ConfigError) as raised:
        load_team(mutate(raw_config(TEAM_STACK), "training", training), plan_of)
    assert any(problem.startswith("gpu-training:training.gpuQuota: belongs to the platform stack 'prod'")
               for problem in raised.value.errors), raised.value.errors


def test_a_team_the_platform_does_not_list_is_refused_before_any_resource():
    platform = load_prod(with_teams())
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw_config(TEAM_STACK), project=PROJECT, stack=TEAM_STACK, platform=platform)
    assert any("teams: lists no team vision" in problem and "add the team's row" in problem
               for problem in raised.value.errors), raised.value.errors


def test_a_borrowed_row_becomes_a_borrowing_limit_and_every_queue_is_bounded():
    raw = with_teams({"name": "vision", "gpuQuota": {"p5-efa": 16, "gpu-spot": 8}, "gpuQuotaBorrowed": ["p5-efa"],
                      "gpuBorrowingLimit": {"gpu-spot": 8}})
    plan = synthesize("prod", overrides={"teams": raw[f"{PROJECT}:teams"]})
    (queue,) = [m for m in plan.manifests_on(None) if m["kind"] == "ClusterQueue" and m["metadata"]["name"] == "team-vision"]
    assert validate_custom_resource(queue) == []
    flavors = {f["name"]: {r["name"]: r for r in f["resources"]} for f in queue["spec"]["resourceGroups"][0]["flavors"]}
    assert flavors["pool-p5-efa"]["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": 0, "borrowingLimit": 16}
    assert flavors["pool-gpu-spot"]["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 8}
    # Kueue borrows without bound where borrowingLimit is unset: the platform sets it on every resource.
    assert all("borrowingLimit" in r for f in flavors.values() for r in f.values())
    # One node of gpu-spot's CPU and memory come with its 8 borrowable GPUs (g6/g5 .48xlarge: 8 GPUs a node).
    assert flavors["pool-gpu-spot"]["cpu"]["borrowingLimit"] == flavors["pool-gpu-spot"]["cpu"]["nominalQuota"]


def test_the_team_plan_makes_no_cluster_queue_and_the_platform_one_per_registered_team(plan_of):
    team, platform = plan_of(TEAM_STACK), plan_of("prod")
    assert not [m for m in team.manifests() if m["kind"] == "ClusterQueue"]
    (local,) = [m for m in team.manifests_on(None) if m["kind"] == "LocalQueue" and m["metadata"]["name"] == "training"]
    assert local["spec"]["clusterQueue"] == "team-vision"
    rows = raw_config("prod")[f"{PROJECT}:teams"]
    queues = {m["metadata"]["name"]: m for m in platform.manifests_on(None) if m["kind"] == "ClusterQueue"}
    for row in rows:
        queue = queues[f"team-{row['name']}"]
        flavors = {f["name"]: {r["name"]: r for r in f["resources"]} for f in queue["spec"]["resourceGroups"][0]["flavors"]}
        for pool, gpus in row["gpuQuota"].items():
            assert flavors[f"pool-{pool}"]["nvidia.com/gpu"]["nominalQuota"] == gpus
        assert queue["spec"]["cohortName"] == "prod"
        assert queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": f"team-{row['name']}"}}


@pytest.mark.parametrize(
    ("stack", "borrowed", "expected"),
    [
        # dev's only GPU pool, and no team in dev's registry: the finding.
        ("dev", ["gpu-spot"], "gpu-training:training.gpuQuotaBorrowed: borrows pool gpu-spot's GPUs, but no other "
         "queue of the cohort owns any to lend (this stack's queue is the only one of the environment's cohort)"),
        # A regional stack's cohort holds its own queue and its registry's teams: vision owns gpu-spot only.
        ("prod-usw2", ["p5-efa"], "borrows pool p5-efa's GPUs, but no other queue of the cohort owns any to lend "
         "(team vision owns none of it)"),
        # prod's one team owns gpu-spot only.
        ("prod", ["p5-efa"], "borrows pool p5-efa's GPUs, but no other queue of the cohort owns any to lend (team "
         "vision owns none of it)"),
        ("prod", ["p5-efa"], "Fix: own the quota instead: remove p5-efa from training.gpuQuotaBorrowed"),
    ],
)
def test_a_queue_cannot_borrow_where_the_cohort_has_no_lender(stack, borrowed, expected):
    raw = mutate(raw_config(stack), "training", {**raw_config(stack)[f"{PROJECT}:training"], "gpuQuotaBorrowed": borrowed})
    found = problems_of(raw, stack)
    assert any(expected in problem for problem in found), found


def test_a_platform_queue_borrows_what_a_team_owns():
    """prod's registry gives team vision 16 of gpu-spot: prod's own queue may borrow it."""
    raw = mutate(raw_config("prod"), "training", {**raw_config("prod")[f"{PROJECT}:training"], "gpuQuotaBorrowed": ["gpu-spot"]})
    assert problems_of(raw, "prod") == []


def test_the_repositorys_team_stacks_are_each_in_their_platforms_registry():
    """Every team stack file names a team its platform's registry lists, so its queue exists."""
    for path in sorted((ROOT / "stacks").glob("Pulumi.team-*.yaml")):
        stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        team, environment = stack_kind(stack)
        platform = planned_config(str(environment))
        assert isinstance(platform, StackConfig)
        assert team in [row.name for row in platform.teams], stack


# --- distinct VPC ranges --------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("stack", "cidr", "other"),
    [
        ("dev", "10.30.0.0/16", "prod"),  # the finding: dev reuses prod's range
        ("dev", "10.30.128.0/20", "prod"),  # inside it
        ("staging", "10.10.0.0/16", "dev"),
        ("prod", "10.20.0.0/16", "staging"),
    ],
)
def test_a_vpc_range_of_another_environment_is_refused(stack, cidr, other):
    other_cidr = raw_config(other)[f"{PROJECT}:network"]["vpcCidr"]
    found = problems_of(mutate(raw_config(stack), "network.vpcCidr", cidr), stack)
    assert (f"gpu-training:network.vpcCidr: overlaps the VPC CIDR {other_cidr} of stack '{other}' "
            f"(stacks/Pulumi.{other}.yaml)") in "\n".join(found), found
    assert any("Fix: pick a range that overlaps no other environment's" in p for p in found)
    assert problems_of(mutate(raw_config(stack), "network.vpcCidr", cidr), stack, sibling_stacks_dir=None) == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("config: [unclosed\n", "the file cannot be read"),
        ("config:\n  gpu-training:region: us-east-1\n", "it sets no network.vpcCidr as text"),
        ("config:\n  gpu-training:network: {vpcCidr: 10.10.0.1/16}\n", "its network.vpcCidr is not a CIDR"),
        ("- a list\n", "the file cannot be read"),
    ],
)
def test_an_unreadable_sibling_is_skipped_with_a_warning(tmp_path: Path, content, reason):
    (tmp_path / "Pulumi.prod.yaml").write_text(content)
    (tmp_path / "Pulumi.staging.yaml").write_text("config:\n  network: {vpcCidr: 10.20.0.0/16}\n")
    found, skipped = sibling_vpc_cidrs(tmp_path, project=PROJECT, stack="dev", environments=ENVIRONMENTS)
    assert [(s.stack, str(s.cidr)) for s in found] == [("staging", "10.20.0.0/16")]
    assert len(skipped) == 1 and "stack 'prod'" in skipped[0] and reason in skipped[0], skipped
    config = load_stack_config(raw_config("dev"), project=PROJECT, stack="dev", sibling_stacks_dir=tmp_path)
    assert isinstance(config, StackConfig) and any(reason in warning for warning in config.warnings)


# --- secret values with surrounding whitespace ------------------------------------------------------

SECRET_VALUE = "s3cr3t-t0ken-7f2a"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (f"{SECRET_VALUE}\n", "ends with a newline"),  # `pulumi config set --secret ... < file`
        (f"{SECRET_VALUE}\r\n", "ends with a newline"),
        (f" {SECRET_VALUE}", "begins with whitespace"),
        (f"{SECRET_VALUE} ", "ends with whitespace"),
        (f"\t{SECRET_VALUE}\n", "begins and ends with whitespace"),
        ("  ", "begins and ends with whitespace"),
    ],
)
def test_a_secret_with_surrounding_whitespace_is_refused_unshown(value, says):
    raw = mutate(raw_config("dev"), "secrets", {"wandb-api-key": value, "hf-token": "fine"})
    found = problems_of(raw, "dev", secret_keys={f"{PROJECT}:secrets"})
    (problem,) = [p for p in found if p.startswith("gpu-training:secrets.wandb-api-key")]
    assert says in problem and "(value not shown)" in problem and "printf %s" in problem, problem
    assert SECRET_VALUE not in "\n".join(found)


@pytest.mark.parametrize(("value", "padding"), [
    ("token", ""), ("two words", ""), ("a\nb", ""), ("x\n", "ends with a newline"), ("x\r\n", "ends with a newline"),
    # a PEM key or JSON document read from its file ends with one newline, as the file does
    ("-----BEGIN KEY-----\nMIIB\n-----END KEY-----\n", ""), ("{\n}\r\n", ""),
    ("a\nb\n\n", "ends with a newline"), ("a\nb \n", "ends with a newline"),
    (" a\nb\n", "begins and ends with whitespace (spaces, tabs or newlines)"),
])
def test_surrounding_whitespace(value, padding):
    assert surrounding_whitespace(value) == padding


def test_a_padded_secret_given_to_the_offline_plan_is_refused():
    with pytest.raises(ConfigError) as raised:
        synthesize("dev", secret_overrides={"secrets": {"wandb-api-key": f"{SECRET_VALUE}\n", "hf-token": "x"}})
    assert any(p.startswith("gpu-training:secrets.wandb-api-key: ends with a newline") for p in raised.value.errors)
    assert SECRET_VALUE not in json.dumps(raised.value.errors)
