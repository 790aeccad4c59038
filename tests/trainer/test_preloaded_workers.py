"""Workers forked from torchrun with torch imported (launcher.preloaded_workers), the start of an
in-place round's workers: what a new interpreter did, each fork does too, and a worker's failure
reaches torchrun without the seconds torch's log formatter spent importing torch._dynamo."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import types

import pytest
from launcher import contract, main, preloaded_workers
from trainer_testlib import TRAINER_DIR, requires_torch

pytestmark = requires_torch


def test_only_a_python_command_of_a_torchrun_with_restarts_is_forked():
    c = contract.from_env({"TRAIN_JOB_ID": "j"})
    assert main.torchrun_command(c, ["-m", "my.train"], in_place=True)[1:3] == ["-m", "launcher.preloaded_workers"]
    assert main.torchrun_command(c, ["train.py"], in_place=True)[1:3] == ["-m", "launcher.preloaded_workers"]
    assert main.torchrun_command(c, ["-m", "my.train"])[1:3] == ["-m", "torch.distributed.run"]
    assert main.torchrun_command(c, ["./train.sh"], in_place=True)[1:3] == ["-m", "torch.distributed.run"]


@pytest.mark.parametrize(("cmd", "args", "command"), [
    (sys.executable, ["-u", "-m", "my.train", "--lr", "1"], ("-m", "my.train", ["--lr", "1"])),
    (sys.executable, ["-u", "/abs/train.py"], ("path", "/abs/train.py", [])),
    ("./train.sh", ["--x"], None),  # --no-python: torchrun's own start
    (sys.executable, ["-m", "my.train"], None),  # not the command torchrun builds: left alone
])
def test_the_command_torchrun_builds_is_read_back(cmd, args, command):
    assert preloaded_workers.python_command(cmd, args) == command


def test_a_torchrun_that_initialised_cuda_starts_its_workers_as_torchrun_does(monkeypatch):
    import torch

    built = (types.SimpleNamespace(start_method="spawn"), sys.executable, ["-u", "-m", "my.train"])
    config_from_args = preloaded_workers.preloaded(lambda _args: built)
    assert config_from_args(None)[1:] == (preloaded_workers.run_command, ["-m", "my.train"])
    assert built[0].start_method == "fork"
    built[0].start_method = "spawn"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert config_from_args(None) == built


def test_a_failure_log_does_not_import_torch_dynamo():
    """torchrun's `logger.exception` for a failed worker, formatted by torch's formatter: the same
    traceback in the message, and torch._dynamo not imported (it was, in seconds, without the filter)."""
    code = textwrap.dedent("""
        import json, logging, sys
        import torch.distributed.run  # torchrun's imports, as its agent has them
        from torch._logging._internal import TorchLogsFormatter
        from launcher import preloaded_workers
        logger = logging.getLogger(preloaded_workers._WORKER_FAILURE_LOGGER)
        logger.addFilter(preloaded_workers.ExceptionInMessage())
        records = []
        handler = logging.Handler()
        handler.emit = lambda record: records.append(TorchLogsFormatter().format(record))
        logger.addHandler(handler)
        try:
            raise RuntimeError("a worker failed")
        except RuntimeError:
            logger.exception("failed (exitcode: %s)", 1)
        print(json.dumps({"text": records[0], "dynamo": "torch._dynamo" in sys.modules}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(TRAINER_DIR), "PATH": "/usr/bin:/bin"}, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["dynamo"] is False
    lines = found["text"].splitlines()  # each prefixed by torch's formatter ("E1206 ... <string>:15] ")
    assert lines[0].endswith("] failed (exitcode: 1)") and lines[1].endswith("] Traceback (most recent call last):")
    assert lines[-1].endswith("] RuntimeError: a worker failed")


def test_the_filter_keeps_a_record_without_an_exception_as_it_is():
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %s", (1,), None)
    assert preloaded_workers.ExceptionInMessage().filter(record)
    assert (record.msg, record.args) == ("failed %s", (1,))


# The worker: what it finds at start, as JSON; round 0 raises (torchrun restarts it), round 1
# registers an atexit handler and ends with SystemExit(0).
WORKER = """\
import atexit, json, os, signal, stat, sys
def sockets():
    found = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            found += stat.S_ISSOCK(os.fstat(int(name)).st_mode)
        except OSError:
            pass
    return found
facts = {"sockets": sockets(), "round": os.environ["TORCHELASTIC_RESTART_COUNT"], "torch_imported": "torch" in sys.modules,
         "parent": os.getppid(), "argv": sys.argv, "name": __name__,
         "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
         "site_reran": os.environ.get("SITE_RAN_IN") == str(os.getpid()),
         "script_dir_site": os.environ.get("SCRIPT_DIR_SITE_RAN_IN"), "path0": sys.path[0]}
print(json.dumps(facts), flush=True)
if facts["round"] == "0":
    raise RuntimeError("round 0 fails")
atexit.register(lambda: print(json.dumps({"atexit": True}), flush=True))
sys.exit(0)
"""
SITE = "import os\nif 'LOCAL_RANK' in os.environ:\n    os.environ['SITE_RAN_IN'] = str(os.getpid())\n"
# In the script's directory, torchrun's working directory too: `python train.py` does not run it
# (site runs before sys.path[0] is set), so a fork must not either, in place of the image's.
SCRIPT_DIR_SITE = "import os\nos.environ['SCRIPT_DIR_SITE_RAN_IN'] = str(os.getpid())\n"


@pytest.mark.scenario  # a real torchrun and two rounds of workers: 10 to 30 s on 2 cores
def test_a_forked_worker_starts_as_a_new_interpreter_would_and_restarts(tmp_path):
    (tmp_path / "train.py").write_text(WORKER)
    (tmp_path / "sitecustomize.py").write_text(SCRIPT_DIR_SITE)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    torchrun = subprocess.Popen(
        [sys.executable, "-m", "launcher.preloaded_workers", "--standalone", "--nproc-per-node", "1",
         "--max-restarts", "1", str(tmp_path / "train.py"), "--lr", "1"],
        env={"PYTHONPATH": f"{site}:{TRAINER_DIR}", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    out, err = torchrun.communicate(timeout=300)
    assert torchrun.returncode == 0, err[-3000:]
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rounds = [line for line in lines if "round" in line]
    assert [r["round"] for r in rounds] == ["0", "1"]
    for r in rounds:
        assert r["torch_imported"] and r["parent"] == torchrun.pid  # a fork of torchrun, its own child
        assert r["argv"] == [str(tmp_path / "train.py"), "--lr", "1"] and r["name"] == "__main__"
        assert r["sigterm_default"] and r["site_reran"] and r["script_dir_site"] is None
        assert r["path0"] == str(tmp_path)
        assert r["sockets"] == 0  # none of torchrun's: its rendezvous store listens on this host (--standalone)
    assert lines[-1] == {"atexit": True}
    assert "RuntimeError: round 0 fails" in err


def test_the_worker_hooks_wrap_a_torch_imported_before_them():
    """A forked worker has torch.distributed imported already: the hooks wrap init_process_group
    then, and the copies other modules took of it too (`dist.init_process_group` is what trainers
    call; torch.distributed.device_mesh's, what `init_device_mesh` calls)."""
    code = textwrap.dedent("""
        import json, os, sys
        import torch.distributed as dist
        import torch.distributed.device_mesh as device_mesh  # torchrun imports it; init_device_mesh calls its copy
        import torch.optim.optimizer as optimizer
        original, steps_hooks = dist.init_process_group, len(optimizer._global_optimizer_post_hooks)
        os.environ.update(LOCAL_RANK="0", TRAIN_COLLECTIVE_TIMEOUT_S="10")
        from launcher import worker_hooks
        worker_hooks.install()
        from torch.distributed import distributed_c10d as c10d
        print(json.dumps({"wrapped": dist.init_process_group is not original,
                          "same": dist.init_process_group is c10d.init_process_group,
                          "device_mesh_same": device_mesh.init_process_group is c10d.init_process_group,
                          "step_hooks_added": len(optimizer._global_optimizer_post_hooks) - steps_hooks}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(TRAINER_DIR), "PATH": "/usr/bin:/bin"}, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"wrapped": True, "same": True, "device_mesh_same": True,
                                                                "step_hooks_added": 3}


@pytest.mark.parametrize(("value", "forked"), [(None, True), ("true", True), ("false", False), (" FALSE ", False)])
def test_an_image_can_turn_forked_workers_off(value, forked):
    from launcher import inplace

    env = {"PET_MAX_RESTARTS": "2", **({inplace.FORKED_WORKERS_VAR: value} if value is not None else {})}
    settings = inplace.from_env(env)
    assert settings is not None and settings.forked_workers is forked


def test_a_forked_workers_setting_that_is_not_a_boolean_is_refused():
    from launcher import inplace

    with pytest.raises(inplace.InPlaceError, match="TRAIN_FORKED_WORKERS must be true or false, got 'no'"):
        inplace.from_env({"PET_MAX_RESTARTS": "2", inplace.FORKED_WORKERS_VAR: "no"})


def test_a_fork_keeps_no_socket_of_torchrun_and_its_pipes_work():
    """A listening socket (the rendezvous store's, on its host) is released: its port is free
    again once torchrun closes it; a pipe (multiprocessing's, to torchrun) still carries bytes."""
    code = textwrap.dedent("""
        import json, os, socket
        from launcher import preloaded_workers
        server = socket.create_server(("127.0.0.1", 0))
        port = server.getsockname()[1]
        to_parent, to_child = os.pipe(), os.pipe()
        pid = os.fork()
        if pid == 0:
            released = preloaded_workers._release_inherited_sockets()
            os.write(to_parent[1], json.dumps({"released": released}).encode())
            os._exit(0 if os.read(to_child[0], 1) == b"x" else 1)  # torchrun's turn: it closes the socket
        facts = json.loads(os.read(to_parent[0], 100))
        server.close()
        try:
            socket.create_server(("127.0.0.1", port)).close()
            facts["port_free"] = True
        except OSError:
            facts["port_free"] = False
        os.write(to_child[1], b"x")
        facts["child_rc"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        print(json.dumps(facts))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(TRAINER_DIR), "PATH": "/usr/bin:/bin"}, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"released": 1, "port_free": True, "child_rc": 0}
