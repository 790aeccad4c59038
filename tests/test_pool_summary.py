"""The plan summary names each pool's shape, GPUs and the ports its nodes open to each other."""

from offline.plan import main
from offline.pool_summary import pool_lines


def test_prods_pools_are_read_from_its_plan(plan_of):
    assert pool_lines(plan_of("prod").resources) == [
        "pool gpu-spot     g6.48xlarge|g5.48xlarge    spot        0-4 nodes x 8 GPUs   between its nodes: "
        "tcp 29400 (socket-fabric), tcp 50000-51999 (socket-fabric)",
        "pool p5-efa       p5.48xlarge                reservation 2-2 nodes x 8 GPUs   between its nodes: "
        "all traffic (efa-fabric)",
        "pool system       m7i.2xlarge                on-demand   3-6 nodes",
    ]


def test_a_pool_whose_group_opens_nothing_to_itself_says_so(plan_of):
    resources = [r for r in plan_of("dev").resources
                 if not (r["type"].endswith("SecurityGroupIngressRule") and "socket-fabric" in r["name"])]
    (gpu,) = [line for line in pool_lines(resources) if "GPUs" in line]
    assert gpu.endswith("between its nodes: nothing")


def test_make_plan_prints_them_after_the_cost(capfd, tmp_path):
    assert main(["--stack", "dev", "--out", str(tmp_path / "dev")]) == 0
    lines = capfd.readouterr().out.splitlines()
    cost = next(i for i, line in enumerate(lines) if line.startswith("  cost: "))
    assert "an idle month $" in lines[cost]
    assert [line.split()[1] for line in lines[cost + 1:cost + 3]] == ["gpu-spot", "system"]
