"""The launcher's fabric self-check, with NCCL log lines recorded from real runs.

Sources of the recorded lines (quoted verbatim):
- SOCKET_RUN: NCCL 2.26.2 on a GPU node without an EFA/OFI plugin, public bug report (search
  index id 6829418395): NCCL loads no net plugin and uses TCP sockets.
- EFA_RUN: NVIDIA/nccl#1597 (8x H200 per node, aws-ofi-nccl on EFA; plugin <= 1.13 wording).
- EFA_RUN_NEW_WORDING: aws-ofi-nccl 1.20.0 on 2x g6.12xlarge (EKS Ray Train sample, index id
  71139104241), the plugin's "Selected provider is efa, fabric is efa" form (>= 1.14).
- NO_PLUGIN: NCCL with NCCL_NET forced and no loadable plugin (public run notes, index id
  55076994125): "NCCL WARN Failed to initialize any NET plugin".
- GDR_CHANNELS: a 2-node EKS DeepSpeed job on EFA (gnosia93/training-on-eks notes, index id
  24194193399): NCCL 2.27.3's inter-node channels "via NET/Libfabric/0/GDRDMA".
- OLD_PLUGIN_P4D: aws-ofi-nccl before v1.14 on 2x p4d.24xlarge (EKS EFA getting-started log, index
  id 22257937941): "Selected Provider is efa" without a NIC count, "Using network AWS Libfabric".
The expected counts are the instance facts (components/facts/instance_types.py, checked against
EC2's catalogue): p5.48xlarge 32, p5en.48xlarge 16, p4d.24xlarge 4, g6e/g6.12xlarge 1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from launcher import fabric
from trainer_testlib import TRAINER_DIR, free_port

SOCKET_RUN = """\
vae-bc5a469e-2296-0:10208:10208 [0] NCCL INFO NCCL version 2.26.2+cuda12.2
vae-bc5a469e-2296-0:10208:10226 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.
vae-bc5a469e-2296-0:10208:10226 [0] NCCL INFO Failed to open libibverbs.so[.1]
vae-bc5a469e-2296-0:10208:10226 [0] NCCL INFO NET/Socket : Using [0]eth0:10.105.0.5<0>
vae-bc5a469e-2296-0:10208:10226 [0] NCCL INFO PROFILER/Plugin: Could not find: libnccl-profiler.so.
vae-bc5a469e-2296-0:10208:10226 [0] NCCL INFO Using network Socket
vae-bc5a469e-2296-0:10208:10226 [0] NCCL INFO ncclCommInitRankConfig comm 0x58892a1d3910 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 100000 commId 0x56bea185a98d5193 - Init START
"""

EFA_RUN = """\
8h200-2:6831:6840 [0] NCCL INFO NET/OFI Setting NCCL_TOPO_FILE environment variable to /proc/self/fd/150
8h200-2:6831:6840 [0] NCCL INFO NET/OFI Creating one domain per process
8h200-2:6831:6840 [0] NCCL INFO NET/OFI Support for global registrations: true
8h200-2:6831:6840 [0] NCCL INFO PROFILER/Plugin: Could not find: libnccl-profiler.so.
8h200-2:6831:6840 [0] NCCL INFO Using network Libfabric
8h200-3:6310:6318 [0] NCCL INFO NET/OFI Selected Provider is efa (found 16 nics)
"""

EFA_RUN_NEW_WORDING = """\
NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.20.0
NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 1 nics)
NCCL INFO Channel 00/0 : 7[3] -> 0[0] [receive] via NET/Libfabric/0
"""

NO_PLUGIN = """\
NCCL WARN Failed to initialize any NET plugin
"""

GDR_CHANNELS = """\
llama-3-8b-node-0-0:194:713 [0] NCCL INFO [Proxy Progress] Device 0 CPU core 19
llama-3-8b-node-0-0:194:712 [0] NCCL INFO Channel 00/0 : 3[0] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA
llama-3-8b-node-0-0:194:712 [0] NCCL INFO Channel 01/0 : 3[0] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA
llama-3-8b-node-0-0:194:712 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Libfabric/0/GDRDMA
llama-3-8b-node-0-0:194:712 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Libfabric/0/GDRDMA
"""

OLD_PLUGIN_P4D = """\
[1,0]<stdout>:nccl-tests-efa-worker-0:26:26 [0] NCCL INFO NET/OFI Running on P4d platform, Setting NCCL_TOPO_FILE environment variable to /opt/aws-ofi-nccl/install/share/aws-ofi-nccl/xml/p4d-24xl-topo.xml
[1,0]<stdout>:nccl-tests-efa-worker-0:26:26 [0] NCCL INFO NET/OFI Selected Provider is efa
[1,0]<stdout>:nccl-tests-efa-worker-0:26:26 [0] NCCL INFO Using network AWS Libfabric
"""


def _provider(nics: int) -> str:
    """aws-ofi-nccl v1.21.1's line (src/nccl_ofi_net.cpp nccl_net_ofi_query_provider_capabilities)."""
    return f"NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found {nics} nics)\n"


P5 = fabric.Expected(efa_devices=32, gpudirect_rdma=True)
P5EN = fabric.Expected(efa_devices=16, gpudirect_rdma=True)
P4D = fabric.Expected(efa_devices=4, gpudirect_rdma=True)
G6E = fabric.Expected(efa_devices=1, gpudirect_rdma=False)


@pytest.mark.parametrize(("log", "expected", "verdict", "reason"), [
    # A whole p5 with GPUDirect RDMA on every inter-node channel.
    (_provider(32) + GDR_CHANNELS, P5, "efa", None),
    # The pod sees 1 of the p5's 32 EFA devices: the failure names both counts.
    (_provider(1) + GDR_CHANNELS, P5, "wrong", "found 1 EFA devices on this node, expected 32"),
    # NVIDIA/nccl#1597's 8x H200 node logs 16 nics: right for p5en, short for p5e/p5.
    (EFA_RUN, P5EN, "efa", None),
    (EFA_RUN, P5, "wrong", "found 16 EFA devices on this node, expected 32"),
    # The g6 sample: 1 nic and channels without GDRDMA, right for a type without GPUDirect RDMA...
    (EFA_RUN_NEW_WORDING, G6E, "efa", None),
    # ...and wrong on one that has it.
    (_provider(32) + "NCCL INFO Channel 00/0 : 7[3] -> 0[0] [receive] via NET/Libfabric/0\n", P5, "wrong",
     "without GPUDirect RDMA, expected with it"),
    # One channel without GDRDMA among GDRDMA ones is enough to fail.
    (_provider(32) + GDR_CHANNELS + "NCCL INFO Channel 02/0 : 0[0] -> 1[0] [send] via NET/Libfabric/0\n", P5, "wrong",
     "without GPUDirect RDMA"),
    # aws-ofi-nccl's own refusal on a gdr_required type (src/platform-aws.cpp).
    ("NCCL WARN NET/OFI GDR disabled on GDR-supported instance type p5/p5e\n", P5, "wrong",
     "GPUDirect RDMA off on an instance type that requires it"),
    # An old plugin logs no count: nothing to hold the node to, the provider still passes.
    (OLD_PLUGIN_P4D, P4D, "efa", None),
    # Nothing stated (an older manifest): the counts are recorded, not judged.
    (_provider(1), fabric.Expected(), "efa", None),
    # NCCL's topology search logs distant NICs on healthy nodes too: not a GPUDirect RDMA verdict.
    (_provider(32) + "NCCL INFO GPU Direct RDMA Disabled for GPU/0-10 (rank 0) - NET/0-1a0 (distance 5 > 4)\n"
     + GDR_CHANNELS, P5, "efa", None),
])
def test_each_node_is_held_to_its_instance_type(log, expected, verdict, reason):
    check = fabric.NetworkCheck(expected=expected).feed_all(log.splitlines())
    assert check.verdict == verdict, check.failure
    assert (check.failure is None) == (reason is None)
    if reason:
        assert reason in (check.failure or "")


def test_the_summary_names_expected_and_found():
    check = fabric.NetworkCheck(expected=P5).feed_all((_provider(32) + _provider(32) + GDR_CHANNELS).splitlines())
    assert check.summary() == {"efa_devices_expected": 32, "efa_devices_found": [32],
                               "gpudirect_rdma_expected": True, "gpudirect_rdma": True}
    short = fabric.NetworkCheck(expected=P5).feed_all(_provider(1).splitlines())
    assert "found 1 EFA devices on this node, expected 32" in fabric.failure_message(short)
    no_gdr = fabric.NetworkCheck(expected=P5).feed_all(EFA_RUN_NEW_WORDING.splitlines()[-1:])
    assert "FI_EFA_USE_DEVICE_RDMA" in fabric.failure_message(no_gdr)


@pytest.mark.parametrize(("env", "expected"), [
    ({}, fabric.Expected()),
    ({"TRAIN_EFA_DEVICES": "32", "TRAIN_EFA_GPUDIRECT_RDMA": "1"}, P5),
    ({"TRAIN_EFA_DEVICES": "1", "TRAIN_EFA_GPUDIRECT_RDMA": "0"}, G6E),
])
def test_expectations_come_from_the_env(env, expected):
    assert fabric.expected_of(env) == expected


@pytest.mark.parametrize("env", [{"TRAIN_EFA_DEVICES": "0"}, {"TRAIN_EFA_DEVICES": "many"},
                                 {"TRAIN_EFA_GPUDIRECT_RDMA": "yes"}])
def test_bad_expectations_are_a_contract_error(env):
    with pytest.raises(fabric.FabricError, match="TRAIN_EFA_"):
        fabric.expected_of(env)


@pytest.mark.parametrize(("log", "verdict", "reason"), [
    (SOCKET_RUN, "wrong", "NCCL chose the Socket network instead of Libfabric (EFA)"),
    (EFA_RUN, "efa", None),
    (EFA_RUN_NEW_WORDING, "efa", None),
    (NO_PLUGIN, "wrong", "NCCL found no usable network plugin"),
    # The plugin loaded, but libfabric picked a TCP provider (the Ray sample's "sockets" case).
    ("NCCL INFO NET/OFI Selected provider is tcp, fabric is 10.0.0.0/16 (found 1 nics)\n", "wrong",
     "selected the libfabric provider tcp instead of efa"),
    # One rank on EFA, another on sockets: the job is only as fast as its slowest link.
    (EFA_RUN + SOCKET_RUN, "wrong", "Socket network"),
    ("NCCL INFO NCCL version 2.29.3+cuda12.6\n", "undecided", None),
])
def test_recorded_logs_are_judged(log, verdict, reason):
    check = fabric.NetworkCheck().feed_all(log.splitlines())
    assert check.verdict == verdict
    assert (check.failure is None) == (reason is None)
    if reason:
        assert reason in (check.failure or "")


def test_only_the_first_wrong_line_is_reported():
    check = fabric.NetworkCheck()
    assert [check.feed(line) for line in (SOCKET_RUN + SOCKET_RUN).splitlines()].count(True) == 1
    assert check.failure_line == "vae-bc5a469e-2296-0:10208:10226 [0] NCCL INFO Using network Socket"


@pytest.mark.parametrize(("given", "expected"), [
    ({}, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}),
    ({"NCCL_DEBUG": "WARN"}, {"NCCL_DEBUG": "INFO"}),
    ({"NCCL_DEBUG": "trace"}, {"NCCL_DEBUG": "TRACE"}),
    ({"NCCL_DEBUG_SUBSYS": "COLL"}, {"NCCL_DEBUG_SUBSYS": "COLL,INIT,NET"}),
    ({"NCCL_DEBUG_SUBSYS": "ALL"}, {"NCCL_DEBUG_SUBSYS": "ALL"}),
])
def test_nccl_logs_its_network_choice_to_files(given, expected):
    env = fabric.nccl_log_env(given, "/tmp/nccl-logs")
    assert env["NCCL_DEBUG_FILE"] == "/tmp/nccl-logs/nccl.%h.%p.log"
    assert expected.items() <= env.items()


def test_fabric_must_be_known():
    assert fabric.fabric_of({}) == "socket"
    with pytest.raises(fabric.FabricError, match="TRAIN_FABRIC must be one of efa, socket, got 'infiniband'"):
        fabric.fabric_of({"TRAIN_FABRIC": "infiniband"})


# A stand-in for a training process: writes the recorded NCCL log the way NCCL does (to
# NCCL_DEBUG_FILE with %h/%p expanded), then works until it finishes or is told to stop.
FAKE_WORKER = textwrap.dedent("""\
    import os, signal, socket, sys, time
    path = os.environ.get("NCCL_DEBUG_FILE", os.devnull).replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
    marker = os.environ["WORKER_MARKER"]
    signal.signal(signal.SIGTERM, lambda *_: (open(marker, "w").write("stopped"), sys.exit(143)))
    with open(path, "w") as log:
        log.write(open(os.environ["RECORDED_LOG"]).read())
    deadline = time.monotonic() + float(os.environ["WORK_SECONDS"])
    while time.monotonic() < deadline:
        time.sleep(0.1)
    open(marker, "w").write("finished")
""")


def _launch_fake_worker(tmp_path, log: str, fabric_name: str = "efa", work_seconds: float = 3.0,
                        extra_env: dict[str, str] | None = None):
    (tmp_path / "worker.py").write_text(FAKE_WORKER)
    (tmp_path / "recorded.log").write_text(log)
    (tmp_path / "hparams.yaml").write_text("{}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAIN_", "NCCL_"))}
    env.update({
        "PYTHONPATH": str(TRAINER_DIR),
        "TRAIN_JOB_ID": "fabric-check",
        "TRAIN_RDZV_HOST": "127.0.0.1",
        "TRAIN_RDZV_PORT": str(free_port()),
        "TRAIN_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "TRAIN_HPARAMS_FILE": str(tmp_path / "hparams.yaml"),
        "TRAIN_HEARTBEAT_FILE": str(tmp_path / "hb" / "heartbeat"),
        "TRAIN_NCCL_LOG_DIR": str(tmp_path / "nccl-logs"),
        "TRAIN_FABRIC": fabric_name,
        "RECORDED_LOG": str(tmp_path / "recorded.log"),
        "WORKER_MARKER": str(tmp_path / "worker.marker"),
        "WORK_SECONDS": str(work_seconds),
        **(extra_env or {}),
    })
    return subprocess.run([sys.executable, "-m", "launcher", "--", str(tmp_path / "worker.py")],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("log", [SOCKET_RUN, NO_PLUGIN], ids=["socket", "no-plugin"])
def test_launcher_exits_2_when_nccl_did_not_pick_efa(tmp_path, log):
    # The worker would run 60 s: the watch stops it as soon as the log shows the wrong network.
    run = _launch_fake_worker(tmp_path, log, work_seconds=60)
    assert run.returncode == 2, run.stderr
    assert (tmp_path / "worker.marker").read_text() == "stopped"
    # torchrun reports its stopped worker above; the launcher's own verdict is the last line.
    message = run.stderr.rstrip().splitlines()[-1]
    assert message.startswith("launcher: error: fabric check failed on an EFA pool:") and "fi_info -p efa" in message
    assert '"event":"fabric_check"' in run.stdout and '"verdict":"wrong"' in run.stdout


def test_launcher_exits_2_naming_both_counts_when_the_node_sees_fewer_efa_devices(tmp_path):
    run = _launch_fake_worker(tmp_path, _provider(1) + GDR_CHANNELS, work_seconds=60,
                              extra_env={"TRAIN_EFA_DEVICES": "32", "TRAIN_EFA_GPUDIRECT_RDMA": "1"})
    assert run.returncode == 2, run.stderr
    assert (tmp_path / "worker.marker").read_text() == "stopped"
    assert "found 1 EFA devices on this node, expected 32" in run.stderr.rstrip().splitlines()[-1]
    event = next(json.loads(line) for line in run.stdout.splitlines() if '"event":"fabric_check"' in line)
    assert (event["verdict"], event["efa_devices_expected"], event["efa_devices_found"]) == ("wrong", 32, [1])


@pytest.mark.parametrize("log", [EFA_RUN, EFA_RUN_NEW_WORDING], ids=["libfabric", "new-wording"])
def test_launcher_proceeds_when_nccl_picked_efa(tmp_path, log):
    run = _launch_fake_worker(tmp_path, log)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "worker.marker").read_text() == "finished"
    assert '"verdict":"efa"' in run.stdout
    # While the job runs the launcher logs the counts its ranks found (scripts/verify reads them).
    assert '"event":"fabric_status"' in run.stdout and '"efa_devices_found":[' in run.stdout
    # NCCL's network choice is echoed to the pod log even though NCCL writes to files.
    assert "nccl: " in run.stderr and ("Using network Libfabric" in run.stderr or "Selected provider is efa" in run.stderr)


def test_socket_pools_are_not_checked(tmp_path):
    run = _launch_fake_worker(tmp_path, SOCKET_RUN, fabric_name="socket", work_seconds=0.5)
    assert run.returncode == 0, run.stderr
    assert "fabric_check" not in run.stdout


# A worker that ends on SIGTERM with WORKER_EXIT, without saving or writing TRAIN_STOPPED_FILE;
# with WORKER_FINISHED set, it declares training finished first (TRAIN_FINISHED_FILE).
SIGNALLED_WORKER = textwrap.dedent("""\
    import os, signal, sys, time
    def end(*_):
        if os.environ.get("WORKER_FINISHED"):
            open(os.environ["TRAIN_FINISHED_FILE"], "w").write("{}")
        sys.exit(int(os.environ["WORKER_EXIT"]))
    signal.signal(signal.SIGTERM, end)
    open(os.environ["WORKER_MARKER"], "w").write("started")
    time.sleep(120)
""")


@pytest.mark.parametrize(("worker_exit", "finished", "launcher_exit"), [
    # Exit 143 restarts the gang as a disruption, without spending maxRestarts: a trainer killed by
    # its liveness probe, which saved nothing and reported no stop, must not pass for one.
    (143, False, 1),
    # A run that finished as the signal came stays a success.
    (0, True, 0),
    # Exit 0 after the signal without training declared finished (Lightning's own SIGTERM path) is
    # a stopped gang: exit 0 would complete the Job mid-run.
    (0, False, 143),
])
def test_a_signal_without_a_stop_after_saving_is_a_failure(tmp_path, worker_exit, finished, launcher_exit):
    (tmp_path / "worker.py").write_text(SIGNALLED_WORKER)
    (tmp_path / "hparams.yaml").write_text("{}\n")
    marker = tmp_path / "worker.marker"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAIN_", "NCCL_", "PET_"))}
    env.update({"PYTHONPATH": str(TRAINER_DIR), "TRAIN_JOB_ID": "unstopped", "TRAIN_RDZV_HOST": "127.0.0.1",
                "TRAIN_RDZV_PORT": str(free_port()), "TRAIN_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
                "TRAIN_HPARAMS_FILE": str(tmp_path / "hparams.yaml"),
                "TRAIN_HEARTBEAT_FILE": str(tmp_path / "hb" / "heartbeat"), "WORKER_MARKER": str(marker),
                "WORKER_EXIT": str(worker_exit), "WORKER_FINISHED": "1" if finished else ""})
    with subprocess.Popen([sys.executable, "-m", "launcher", "--", str(tmp_path / "worker.py")], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True) as proc:
        try:
            deadline = time.monotonic() + 60
            while not marker.exists():
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == launcher_exit
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.stdout
        events = [json.loads(line) for line in proc.stdout.read().splitlines() if line.startswith("{")]
    assert bool([e for e in events if e["event"] == "trainer_not_stopped"]) is (launcher_exit == 1), events
    (exit_event,) = [e for e in events if e["event"] == "launcher_exit"]
    assert (exit_event["rc"], exit_event["signal"]) == (launcher_exit, "SIGTERM")
