"""Published 2-node all_reduce bus bandwidths: what a healthy fabric of each type reaches.

Only measurements with a public, identifiable source are here; a type without one gets no
threshold, and `--nccl` then reports its number and says so instead of judging it (or the user
gives a floor with --nccl-min-busbw). Every row: 2 nodes x all 8 GPUs of the type,
nccl-tests all_reduce_perf, float sum, out-of-place busbw at a 2 GiB message (2147483648 B), the
size every source below reports and the size our test ends at.

Checked 2026-11-30. Not found (so no row): p5e, p5en, p6-b200, p6-b300 (one figure exists in a
public document whose repository could not be identified), g5, g6, g6e.
"""

from __future__ import annotations

from dataclasses import dataclass

REFERENCE_SIZE_BYTES = 2 * 1024**3
REFERENCE_NODES = 2
# A run fails below this share of the published figure. nccl-tests applies the same margin to
# its own floor (NCCL_TESTS_MIN_BW: "FAILED" when bw < min * 0.9, src/util.cu writeResultFooter);
# the failure it exists to catch (NCCL on sockets instead of EFA) costs ~19x (p4d: 4.13 vs 77.35).
MIN_FRACTION = 0.9


@dataclass(frozen=True)
class Reference:
    instance_type: str
    busbw_gbps: float
    source: str
    published: str
    """When the figure was written (git blame of the line, or the commit read)."""

    @property
    def threshold_gbps(self) -> float:
        return round(self.busbw_gbps * MIN_FRACTION, 2)


REFERENCES = {r.instance_type: r for r in (
    Reference("p4d.24xlarge", 77.35,
              "skypilot-org/skypilot@05e8e8fe examples/aws_efa/README.md, 2x p4d.24xlarge on HyperPod/EKS, "
              "4 EFA (without EFA: 4.13)", "commit 05e8e8fe, read 2026-11-30"),
    Reference("p4de.24xlarge", 78.33,
              "aws-samples/awsome-distributed-training@7217859f micro-benchmarks/nccl-tests/README.md "
              "(2x p4de.24xlarge, -b 8 -e 2G)", "2023-07-14"),
    Reference("p5.48xlarge", 443.72,
              "aws-samples/awsome-distributed-training@7217859f micro-benchmarks/nccl-tests/README.md "
              "(2x p5.48xlarge, -b 8 -e 16G; 487.09 at 16 GiB)", "2024-04-19"),
)}


def reference_for(instance_types: tuple[str, ...]) -> Reference | None:
    """The reference of a pool: only when every type in it has one, the lowest of them (a gang may
    land on any type of the pool)."""
    found = [REFERENCES.get(t) for t in instance_types]
    if not found or any(r is None for r in found):
        return None
    return min((r for r in found if r is not None), key=lambda r: r.busbw_gbps)
