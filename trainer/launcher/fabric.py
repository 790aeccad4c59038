"""The fabric self-check: on an EFA pool, fail the job when NCCL did not pick the OFI/EFA network.

Without libfabric and the aws-ofi-nccl plugin (or with EFA devices the pod cannot open), NCCL
quietly falls back to TCP sockets over one interface and trains at a fraction of the bandwidth
the pod pays for. On an EFA pool (TRAIN_FABRIC=efa) the launcher therefore:

1. makes NCCL log its network choice to files of its own (NCCL_DEBUG=INFO for the INIT and NET
   subsystems, NCCL_DEBUG_FILE=<dir>/nccl.%h.%p.log), leaving the trainer's stdout readable;
2. reads those files while the job runs, echoes NCCL's warnings and its network choice to
   stderr, and stops the workers as soon as a rank reports another network than Libfabric
   (`Using network Socket`), another libfabric provider than efa, or no usable net plugin;
3. then exits 2 (the JobSet fails the job instead of restarting it) with one line saying why.

It also holds each node to its instance type, as the manifest states it (TRAIN_EFA_DEVICES, from
the config model's facts; TRAIN_EFA_GPUDIRECT_RDMA): a pod whose ranks see fewer EFA devices
than the type has ("found N nics": aws-ofi-nccl counts the fi_info entries of the selected
provider, src/nccl_ofi_ofiutils.cpp nccl_ofi_ofiutils_get_providers), or whose inter-node
channels run without GPUDirect RDMA on a type that has it, trains at a fraction of its bandwidth
and fails with both counts named. Each pod's launcher reads only its own ranks' logs, so the
check is per node.

The workload also sets NCCL_NET=Libfabric on EFA pools, so NCCL itself refuses to fall back
("Failed to initialize any NET plugin"); this check turns that into a clear message and still
catches a job whose env overrides NCCL_NET.

The log lines come from NCCL 2.29.3 (src/init.cc "Using network %s"; src/transport/net.cc
"Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via NET/%s/%d%s" with "/GDRDMA" when the
channel uses GPUDirect RDMA; src/graph/paths.cc "GPU Direct RDMA Disabled for ...") and
aws-ofi-nccl v1.21.1 (src/nccl_ofi_net.cpp "Selected provider is %s, fabric is %s (found %d
nics)"; "Selected Provider is %s" before v1.14; src/platform-aws.cpp "GDR disabled on
GDR-supported instance type %s"), as recorded from real runs in tests/trainer/test_fabric_check.py.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

FABRIC_VAR = "TRAIN_FABRIC"
FABRICS = ("efa", "socket")
LOG_DIR_VAR = "TRAIN_NCCL_LOG_DIR"
# What the node's instance type has (set by the workload from components/facts/instance_types.py).
EFA_DEVICES_VAR = "TRAIN_EFA_DEVICES"
GDR_VAR = "TRAIN_EFA_GPUDIRECT_RDMA"
DEFAULT_LOG_DIR = "/tmp/nccl-logs"
POLL_SECONDS = 1.0
# The names NCCL gives aws-ofi-nccl's network ("AWS Libfabric" with NCCL_NET set so, or with
# plugins <= 1.11; aws/aws-ofi-nccl src/nccl_ofi_interface_nvidia.cpp).
EFA_NETWORKS = ("Libfabric", "AWS Libfabric", "OFI")
NCCL_SUBSYSTEMS = ("INIT", "NET")

_USING_NETWORK = re.compile(r"NCCL INFO Using network (?P<network>\S.*?)\s*\Z")
_PROVIDER = re.compile(r"NET/OFI Selected provider is (?P<provider>[\w-]+)(?:.*\(found (?P<nics>\d+) nics\))?",
                       re.IGNORECASE)
_NO_NET_PLUGIN = "Failed to initialize any NET plugin"
# An inter-node channel; flags such as /GDRDMA, (PCI), /Shared follow the device number.
_NET_CHANNEL = re.compile(r"\[(?:send|receive)\]\s+via NET/(?P<network>[^/]+)/\d+(?:\(\d+\))?(?P<flags>\S*)")
# aws-ofi-nccl's own word that GPUDirect RDMA is off (src/platform-aws.cpp, src/nccl_ofi_ofiutils.cpp).
# Not NCCL's "GPU Direct RDMA Disabled for GPU/.. - NET/..": NCCL logs it for every distant NIC it
# tries before a near one (src/graph/paths.cc ncclTopoIsGdrAvail), healthy nodes included.
_GDR_OFF = ("GDR disabled on GDR-supported instance type", "Could not disable CUDA API usage for HMEM, disabling GDR")
_FORWARDED = (" NCCL WARN ", "Using network", "Selected provider", "Selected Provider", _GDR_OFF[1])
HINT = ("check that the image carries libfabric and aws-ofi-nccl (`fi_info -p efa` in the pod), that the pod "
        "requests vpc.amazonaws.com/efa, and that the node advertises it (docs/gpu-fabric-and-capacity.md)")
GDR_HINT = ("check that FI_EFA_USE_DEVICE_RDMA is not 0 in the job's env, and that the node's EFA driver and GPU "
            "driver support peer memory or DMA-BUF (the EKS NVIDIA AMI does; docs/gpu-fabric-and-capacity.md)")


class FabricError(ValueError):
    """TRAIN_FABRIC (or what the node should have) is not something this launcher understands."""


@dataclass(frozen=True)
class Expected:
    """What the node's instance type has; None: not stated, not checked."""

    efa_devices: int | None = None
    gpudirect_rdma: bool | None = None


@dataclass
class NetworkCheck:
    """What NCCL's log lines say about the network it chose (pure: feed it lines)."""

    expected: Expected = field(default_factory=Expected)
    efa_seen: str | None = None
    failure: str | None = None
    failure_line: str | None = None
    nics_found: set[int] = field(default_factory=set)
    """Every "found N nics" count the ranks logged (one per rank; they should agree)."""
    gdr_seen: bool | None = None
    """True when an inter-node channel uses GPUDirect RDMA, False when one does not."""

    def feed(self, line: str) -> bool:
        """Read one log line; True the first time it shows a wrong network."""
        if self.failure:
            return False
        self._observe(line)
        problem = _problem(line) or self._against_expected(line)
        if problem:
            self.failure, self.failure_line = problem, line.strip()
            return True
        if self.efa_seen is None and (_PROVIDER.search(line) or _USING_NETWORK.search(line)):
            self.efa_seen = line.strip()
        return False

    def _observe(self, line: str) -> None:
        provider = _PROVIDER.search(line)
        if provider and provider["nics"]:
            self.nics_found.add(int(provider["nics"]))
        channel = _NET_CHANNEL.search(line)
        if channel:
            uses_gdr = "/GDRDMA" in channel["flags"]
            self.gdr_seen = uses_gdr if self.gdr_seen is None else self.gdr_seen and uses_gdr
        elif any(marker in line for marker in _GDR_OFF):
            self.gdr_seen = False

    def _against_expected(self, line: str) -> str | None:
        want = self.expected
        provider = _PROVIDER.search(line)
        if provider and provider["nics"] and want.efa_devices is not None and int(provider["nics"]) != want.efa_devices:
            return (f"aws-ofi-nccl found {provider['nics']} EFA devices on this node, expected {want.efa_devices} "
                    f"(the instance type's count, {EFA_DEVICES_VAR}): the pod sees only part of the fabric")
        if want.gpudirect_rdma and self.gdr_seen is False:
            return ("NCCL runs over EFA without GPUDirect RDMA, expected with it on this instance type "
                    f"({GDR_VAR}=1): GPU buffers go through host memory")
        return None

    def summary(self) -> dict[str, object]:
        """The counts and GPUDirect RDMA state for the launcher's fabric_check event."""
        return {"efa_devices_expected": self.expected.efa_devices, "efa_devices_found": sorted(self.nics_found),
                "gpudirect_rdma_expected": self.expected.gpudirect_rdma, "gpudirect_rdma": self.gdr_seen}

    def feed_all(self, lines: Iterable[str]) -> NetworkCheck:
        for line in lines:
            self.feed(line)
        return self

    @property
    def verdict(self) -> str:
        """`efa`, `wrong` or `undecided` (no rank has set up an NCCL network yet)."""
        return "wrong" if self.failure else "efa" if self.efa_seen else "undecided"


def _problem(line: str) -> str | None:
    using = _USING_NETWORK.search(line)
    if using and using["network"] not in EFA_NETWORKS:
        return f"NCCL chose the {using['network']} network instead of Libfabric (EFA)"
    provider = _PROVIDER.search(line)
    if provider and provider["provider"].lower() != "efa":
        return f"aws-ofi-nccl selected the libfabric provider {provider['provider']} instead of efa"
    if _NO_NET_PLUGIN in line:
        return "NCCL found no usable network plugin (aws-ofi-nccl did not load or found no EFA device)"
    if _GDR_OFF[0] in line:  # aws-ofi-nccl refuses the endpoint on a type that requires GPUDirect RDMA
        return "aws-ofi-nccl found GPUDirect RDMA off on an instance type that requires it"
    return None


def fabric_of(environ: Mapping[str, str]) -> str:
    fabric = environ.get(FABRIC_VAR, "").strip() or "socket"
    if fabric not in FABRICS:
        raise FabricError(f"{FABRIC_VAR} must be one of {', '.join(FABRICS)}, got {fabric!r}")
    return fabric


def expected_of(environ: Mapping[str, str]) -> Expected:
    """The node's EFA device count and GPUDirect RDMA, as the workload states them (unset: unchecked)."""
    devices = environ.get(EFA_DEVICES_VAR, "").strip()
    gdr = environ.get(GDR_VAR, "").strip()
    if devices and not (devices.isdigit() and int(devices) > 0):
        raise FabricError(f"{EFA_DEVICES_VAR} must be a positive whole number, got {devices!r}")
    if gdr not in ("", "0", "1"):
        raise FabricError(f"{GDR_VAR} must be 0 or 1, got {gdr!r}")
    return Expected(efa_devices=int(devices) if devices else None, gpudirect_rdma={"": None, "0": False, "1": True}[gdr])


def nccl_log_env(environ: Mapping[str, str], log_dir: str) -> dict[str, str]:
    """NCCL settings that make every rank log its network choice to `log_dir`."""
    level = environ.get("NCCL_DEBUG", "").strip().upper()
    subsystems = [s for s in environ.get("NCCL_DEBUG_SUBSYS", "").replace(" ", "").split(",") if s]
    if subsystems and "ALL" not in (s.upper() for s in subsystems):
        subsystems += [s for s in NCCL_SUBSYSTEMS if s not in (x.upper() for x in subsystems)]
    return {
        "NCCL_DEBUG": level if level in ("INFO", "TRACE") else "INFO",
        "NCCL_DEBUG_SUBSYS": ",".join(subsystems or NCCL_SUBSYSTEMS),
        # %h: host, %p: pid (NCCL docs, NCCL_DEBUG_FILE): one file per rank.
        "NCCL_DEBUG_FILE": os.path.join(log_dir, "nccl.%h.%p.log"),
    }


@dataclass
class FabricWatch:
    """Reads the NCCL log files of one run while it lasts (a daemon thread)."""

    log_dir: str
    on_failure: Callable[[NetworkCheck], None]
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    check: NetworkCheck = field(default_factory=NetworkCheck)
    """Give it the node's Expected (NetworkCheck(expected=expected_of(env))) to hold the node to its type."""
    on_status: Callable[[NetworkCheck], None] | None = None
    """Called when the counts or the GPUDirect RDMA state first show or change (a few times a run):
    the launcher logs them, so scripts/verify can read them while the job runs."""
    _reported: dict[str, object] | None = None
    _offsets: dict[str, int] = field(default_factory=dict)
    _partial: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> FabricWatch:
        os.makedirs(self.log_dir, exist_ok=True)
        for name in os.listdir(self.log_dir):  # a restarted container's old logs are not this run's
            if name.startswith("nccl."):
                os.unlink(os.path.join(self.log_dir, name))
        self._thread = threading.Thread(target=self._run, name="fabric-watch", daemon=True)
        self._thread.start()
        return self

    def finish(self) -> NetworkCheck:
        """Stop watching, read what the ranks wrote last, and return the result."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.scan()
        return self.check

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self.scan()

    def scan(self) -> None:
        try:
            names = sorted(n for n in os.listdir(self.log_dir) if n.startswith("nccl."))
        except OSError:
            return
        for name in names:
            for line in self._new_lines(os.path.join(self.log_dir, name)):
                if any(marker in line for marker in _FORWARDED):
                    self.stream.write(f"nccl: {line}\n")
                    self.stream.flush()
                if self.check.feed(line):
                    self.on_failure(self.check)
        summary = self.check.summary()
        if self.on_status and summary != self._reported and (self.check.nics_found or self.check.gdr_seen is not None):
            self._reported = summary
            self.on_status(self.check)

    def _new_lines(self, path: str) -> list[str]:
        try:
            with open(path, "rb") as f:
                f.seek(self._offsets.get(path, 0))
                data = f.read()
        except OSError:
            return []
        self._offsets[path] = self._offsets.get(path, 0) + len(data)
        text = self._partial.pop(path, "") + data.decode(errors="replace")
        *lines, rest = text.split("\n")
        if rest:
            self._partial[path] = rest
        return lines


def failure_message(check: NetworkCheck) -> str:
    hint = GDR_HINT if "GPUDirect RDMA" in (check.failure or "") else HINT
    return f"fabric check failed on an EFA pool: {check.failure} (NCCL log: {check.failure_line!r}); {hint}"
