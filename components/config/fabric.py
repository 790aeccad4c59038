"""The `fabric` section: the ports distributed training uses between GPU nodes.

NCCL cannot be told which ports to listen on (NVIDIA/nccl#388); it binds ephemeral ports from
the pod's `net.ipv4.ip_local_port_range`. The training pods pin that sysctl to `ncclPortRange`
and the fabric security group opens exactly this range plus the rendezvous ports, from itself.
One source, read by both: the security group and the pod spec can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config.reader import Section

# NCCL opens several sockets per rank and peer, and every outgoing connection of the pod takes
# its source port from the same range: fewer ports than this starves busy 8-GPU nodes.
MIN_NCCL_PORTS = 1024


@dataclass(frozen=True)
class PortRange:
    first: int
    last: int

    @property
    def sysctl_value(self) -> str:
        """The value of net.ipv4.ip_local_port_range that pins this range."""
        return f"{self.first} {self.last}"

    def __contains__(self, port: int) -> bool:
        return self.first <= port <= self.last


@dataclass(frozen=True)
class FabricConfig:
    rendezvous_ports: tuple[int, ...]
    nccl_port_range: PortRange


def parse_fabric(section: Section) -> FabricConfig:
    ports_key = section.key("rendezvousPorts")
    raw_ports = section.items("rendezvousPorts")
    if not raw_ports:
        section.error(ports_key, raw_ports, "needs at least one port", "use [29400], torchrun's c10d default")
    ports = tuple(
        section.check_integer(f"{ports_key}[{i}]", p)
        for i, p in enumerate(raw_ports)
    )
    # Rules over several values judge only values that passed: a rejected one stands in as a
    # placeholder, and a rule about it would report what the user never wrote.
    ports_ok = section.ok("rendezvousPorts")
    if ports_ok and len(set(ports)) != len(ports):
        section.error(ports_key, raw_ports, "lists a port twice", "list each port once")

    range_section = section.section("ncclPortRange")
    first = range_section.integer("first")
    last = range_section.integer("last")
    range_section.finish()
    nccl = PortRange(first, last)
    range_ok = not range_section.failed
    if range_ok and last - first + 1 < MIN_NCCL_PORTS:
        section.error(range_section.path, {"first": first, "last": last},
                      f"must span at least {MIN_NCCL_PORTS} ports with first < last",
                      "use e.g. first: 50000, last: 51999")
    for port in ports if ports_ok and range_ok else ():
        if port in nccl:
            # An outgoing connection could take the rendezvous port first; the c10d store
            # would then fail to bind and the whole gang would never start.
            section.error(ports_key, port, f"lies inside ncclPortRange {first}-{last}",
                          "move the rendezvous port or the range so they do not overlap")
    section.finish()
    return FabricConfig(rendezvous_ports=ports, nccl_port_range=nccl)
