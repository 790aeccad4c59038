"""The TRAIN_* and PET_* environment contract and the launcher's command line (torch only where named)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from launcher import contract
from launcher.main import UsageError, parse_args, torchrun_command
from trainer_testlib import TRAINER_DIR

OK = {"TRAIN_JOB_ID": "job-1"}


def test_defaults():
    c = contract.from_env(OK)
    assert (c.nnodes, c.nproc_per_node, c.rdzv_host, c.rdzv_port) == (1, 1, "localhost", 29400)
    assert c.checkpoint_dir == "/workspace/checkpoints"
    assert c.data_dir == "/workspace/data"
    assert c.hparams_file == "/etc/trainer/hparams.yaml"
    assert c.heartbeat_file == "/tmp/trainer/heartbeat"
    assert (c.checkpoint_keep, c.mtbf_s) == (3, 21600.0)
    assert c.checkpoint_interval_s is None and c.checkpoint_every_steps is None
    assert c.rdzv_endpoint == "localhost:29400"


def test_values_and_to_env_round_trip():
    env = {
        "TRAIN_JOB_ID": "llm.run_7",
        "PET_NNODES": "4",
        "PET_NPROC_PER_NODE": "8",
        "TRAIN_RDZV_HOST": "train-workers-0-0.train",
        "TRAIN_RDZV_PORT": "29500",
        "TRAIN_CHECKPOINT_DIR": "/mnt/efs/ckpt/",
        "TRAIN_CHECKPOINT_INTERVAL_S": "900",
        "TRAIN_MTBF_S": "4500.5",
        "TRAIN_CHECKPOINT_KEEP": "5",
        "TRAIN_HEARTBEAT_FILE": "/tmp/hb",
    }
    c = contract.from_env(env)
    assert c.rdzv_endpoint == "train-workers-0-0.train:29500"
    assert c.checkpoint_dir == "/mnt/efs/ckpt"
    assert c.checkpoint_interval_s == 900.0 and c.mtbf_s == 4500.5
    assert contract.from_env(c.to_env()) == c


def test_ipv6_endpoint_is_bracketed():
    assert contract.from_env({**OK, "TRAIN_RDZV_HOST": "fd00::1"}).rdzv_endpoint == "[fd00::1]:29400"


@pytest.mark.parametrize(
    ("env", "variable", "text"),
    [
        ({}, "TRAIN_JOB_ID", "is required"),
        ({"TRAIN_JOB_ID": "bad id"}, "TRAIN_JOB_ID", "[A-Za-z0-9._-]"),
        ({"TRAIN_JOB_ID": "-x"}, "TRAIN_JOB_ID", "starting with"),
        ({**OK, "PET_NNODES": "two"}, "PET_NNODES", "must be an integer"),
        ({**OK, "PET_NNODES": "0"}, "PET_NNODES", ">= 1"),
        ({**OK, "PET_NPROC_PER_NODE": "-1"}, "PET_NPROC_PER_NODE", ">= 1"),
        ({**OK, "PET_NPROC_PER_NODE": "1.5"}, "PET_NPROC_PER_NODE", "must be an integer"),
        # torchrun takes these; the gang is fixed and its world size a product (launcher.contract)
        ({**OK, "PET_NNODES": "1:2"}, "PET_NNODES", "must be an integer"),
        ({**OK, "PET_NPROC_PER_NODE": "gpu"}, "PET_NPROC_PER_NODE", "must be an integer"),
        ({**OK, "TRAIN_NNODES": "2"}, "TRAIN_NNODES", "torchrun's own PET_NNODES: set PET_NNODES='2' instead"),
        ({**OK, "PET_NNODES": "4", "TRAIN_NNODES": "2"}, "TRAIN_NNODES", "set PET_NNODES='2' instead"),
        ({**OK, "TRAIN_NPROC_PER_NODE": "8"}, "TRAIN_NPROC_PER_NODE", "set PET_NPROC_PER_NODE='8' instead"),
        ({**OK, "TRAIN_RDZV_PORT": "80"}, "TRAIN_RDZV_PORT", "between 1024 and 65535"),
        ({**OK, "TRAIN_RDZV_PORT": "70000"}, "TRAIN_RDZV_PORT", "between 1024 and 65535"),
        ({**OK, "TRAIN_RDZV_PORT": "http"}, "TRAIN_RDZV_PORT", "must be an integer"),
        ({**OK, "TRAIN_RDZV_HOST": "host:29400"}, "TRAIN_RDZV_HOST", "host name or IP"),
        ({**OK, "TRAIN_RDZV_HOST": "a b"}, "TRAIN_RDZV_HOST", "host name or IP"),
        ({**OK, "TRAIN_CHECKPOINT_DIR": "ckpt"}, "TRAIN_CHECKPOINT_DIR", "absolute path"),
        ({**OK, "TRAIN_DATA_DIR": "./data"}, "TRAIN_DATA_DIR", "absolute path"),
        ({**OK, "TRAIN_HPARAMS_FILE": "hp.yaml"}, "TRAIN_HPARAMS_FILE", "absolute path"),
        ({**OK, "TRAIN_HEARTBEAT_FILE": "hb"}, "TRAIN_HEARTBEAT_FILE", "absolute path"),
        ({**OK, "TRAIN_CHECKPOINT_INTERVAL_S": "0"}, "TRAIN_CHECKPOINT_INTERVAL_S", "positive"),
        ({**OK, "TRAIN_CHECKPOINT_INTERVAL_S": "soon"}, "TRAIN_CHECKPOINT_INTERVAL_S", "number of seconds"),
        ({**OK, "TRAIN_MTBF_S": "-5"}, "TRAIN_MTBF_S", "positive"),
        ({**OK, "TRAIN_MTBF_S": "inf"}, "TRAIN_MTBF_S", "finite"),
        ({**OK, "TRAIN_CHECKPOINT_KEEP": "0"}, "TRAIN_CHECKPOINT_KEEP", ">= 1"),
        ({**OK, "TRAIN_CHECKPOINT_EVERY_STEPS": "0"}, "TRAIN_CHECKPOINT_EVERY_STEPS", ">= 1"),
    ],
)
def test_invalid_values_name_the_variable(env, variable, text):
    with pytest.raises(contract.ContractError) as err:
        contract.from_env(env)
    assert len(err.value.errors) == 1
    message = err.value.errors[0]
    assert message.startswith(variable) and text in message


def test_every_error_is_reported_at_once():
    with pytest.raises(contract.ContractError) as err:
        contract.from_env({"PET_NNODES": "x", "TRAIN_RDZV_PORT": "1"})
    assert [m.split()[0] for m in err.value.errors] == ["PET_NNODES", "TRAIN_RDZV_PORT", "TRAIN_JOB_ID"]
    assert "\n" not in str(err.value)


def test_empty_values_mean_default():
    c = contract.from_env({**OK, "PET_NNODES": "", "TRAIN_CHECKPOINT_INTERVAL_S": " "})
    assert c.nnodes == 1 and c.checkpoint_interval_s is None


# ---------------------------------------------------------------- command line

C2 = contract.from_env({**OK, "PET_NNODES": "2", "PET_NPROC_PER_NODE": "8", "TRAIN_RDZV_HOST": "head"})
TORCHRUN = [  # no --nnodes, --nproc-per-node: torchrun reads its PET_NNODES, PET_NPROC_PER_NODE
    sys.executable, "-m", "torch.distributed.run",
    "--rdzv-backend", "c10d", "--rdzv-endpoint", "head:29400", "--rdzv-id", "job-1",
]


@pytest.mark.parametrize(
    ("command", "tail"),
    [
        (["-m", "pkg.train", "--lr", "1"], ["-m", "pkg.train", "--lr", "1"]),
        (["python", "-m", "pkg.train"], ["-m", "pkg.train"]),
        (["python3", "train.py", "x"], ["train.py", "x"]),
        (["/opt/bin/train"], ["--no-python", "/opt/bin/train"]),
    ],
)
def test_torchrun_command(command, tail):
    assert torchrun_command(C2, command) == TORCHRUN + tail


@pytest.mark.parametrize("command", [[], ["python"], ["-c", "print(1)"], ["-m"]])
def test_bad_training_commands(command):
    with pytest.raises(UsageError):
        torchrun_command(C2, command)


@pytest.mark.parametrize(
    ("argv", "dry_run", "command"),
    [
        (["--", "-m", "x"], False, ["-m", "x"]),
        (["-m", "x"], False, ["-m", "x"]),
        (["--dry-run", "--", "-m", "x", "--dry-run"], True, ["-m", "x", "--dry-run"]),
        (["--dry-run", "train.py"], True, ["train.py"]),
    ],
)
def test_parse_args(argv, dry_run, command):
    opts, cmd = parse_args(argv)
    assert opts["dry_run"] is dry_run and cmd == command


# ------------------------------------------------------------ the real process


def _launcher_env():
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAIN_", "PET_"))}
    base["PYTHONPATH"] = str(TRAINER_DIR)
    return base


def _launcher(env, *args, timeout=30):
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args],
        env={**_launcher_env(), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({}, "TRAIN_JOB_ID"),
        ({**OK, "PET_NPROC_PER_NODE": "zero"}, "PET_NPROC_PER_NODE"),
        ({**OK, "PET_NNODES": "abc"}, "PET_NNODES"),
        ({**OK, "TRAIN_NNODES": "2"}, "TRAIN_NNODES"),
        ({**OK, "TRAIN_RDZV_PORT": "99999"}, "TRAIN_RDZV_PORT"),
    ],
)
def test_launcher_rejects_bad_contract_with_one_line_and_exit_2(env, variable):
    p = _launcher(env, "--", "-m", "example_trainer.train")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("launcher: error: ") and variable in lines[0]
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_launcher_checks_the_files_it_needs(tmp_path):
    env = {
        **OK,
        "TRAIN_HPARAMS_FILE": str(tmp_path / "missing.yaml"),
        "TRAIN_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "TRAIN_HEARTBEAT_FILE": str(tmp_path / "hb" / "heartbeat"),
    }
    p = _launcher(env, "-m", "example_trainer.train")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "TRAIN_HPARAMS_FILE" in p.stderr and "Traceback" not in p.stderr


def test_launcher_without_command_is_a_usage_error():
    p = _launcher(OK)
    assert p.returncode == 2 and "no training command" in p.stderr


def test_launcher_help():
    p = _launcher({}, "--help")
    assert p.returncode == 0 and "usage: python -m launcher" in p.stdout


def test_launcher_dry_run_prints_torchrun_and_resume(tmp_path):
    from launcher import checkpoint

    ck = tmp_path / "ckpt"
    done = ck / checkpoint.step_dir_name(40)
    done.mkdir(parents=True)
    (done / "rank-00000.pt").write_bytes(b"x" * 10)
    (done / "COMPLETE").write_text(json.dumps({"step": 40, "files": {"rank-00000.pt": {"bytes": 10}}}))
    (ck / checkpoint.step_dir_name(60)).mkdir()  # no marker: ignored
    env = {**OK, "PET_NPROC_PER_NODE": "2", "TRAIN_CHECKPOINT_DIR": str(ck)}
    p = _launcher(env, "--dry-run", "--", "-m", "example_trainer.train")
    assert p.returncode == 0, p.stderr
    record = json.loads(p.stdout)
    assert record["event"] == "dry_run"
    assert record["cmd"][3:] == [
        "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:29400", "--rdzv-id", "job-1",
        "--rdzv-conf", "join_timeout=1020", "-m", "example_trainer.train",
    ]
    # torchrun reads the gang's size from its own variables: the checked values, defaults filled in
    assert (record["env"]["PET_NNODES"], record["env"]["PET_NPROC_PER_NODE"]) == ("1", "2")
    assert record["env"]["TRAIN_RESUME_FROM"] == str(done)
    assert record["env"]["TRAIN_CHECKPOINT_KEEP"] == "3"


@pytest.mark.parametrize("env", [{"PET_NNODES": "abc"}, {"PET_NPROC_PER_NODE": "0"}])
def test_torchrun_answers_a_bad_size_with_a_traceback_and_exit_1(env, tmp_path):
    """Why the launcher checks PET_NNODES and PET_NPROC_PER_NODE although torchrun reads them: its
    own answer is a traceback and exit 1, which spends a gang restart. Should this fail (a later
    torch exits 2 with one line), the launcher's check of these two can go."""
    script = tmp_path / "hi.py"
    script.write_text("print('hi')\n")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--rdzv-backend", "c10d",
                        "--rdzv-id", "x", str(script)], env={**_launcher_env(), **env},
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" in p.stderr and "hi" not in p.stdout


def test_the_old_gang_size_names_are_accepted_for_one_release_when_they_agree():
    """The workload sets both names for one release (training_job.trainer_env): an image whose
    launcher predates the rename reads only the old ones."""
    c = contract.from_env({**OK, "PET_NNODES": "2", "TRAIN_NNODES": "2",
                           "PET_NPROC_PER_NODE": "8", "TRAIN_NPROC_PER_NODE": "8"})
    assert (c.nnodes, c.nproc_per_node) == (2, 8)
