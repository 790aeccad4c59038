"""No worker failure goes unseen (issue 44): a traceback raised after init_process_group reaches
the pod log, command-line and start-up errors exit 2 as config errors with the line that says
why, and a gang whose workers train alone fails with exit 2 naming the likely cause. Each runs
the real launcher and torchrun on localhost with tiny scripts (a few seconds each)."""

from __future__ import annotations

import pytest
from trainer_testlib import free_port, requires_torch

pytestmark = requires_torch


def _run(trainer_env, launch, tmp_path, script: str, *args: str, nproc: int = 1, **train_vars: str):
    path = tmp_path / "script.py"
    path.write_text(script)
    run = launch(trainer_env(PET_NPROC_PER_NODE=str(nproc), **train_vars), command=[str(path), *args])
    rc = run.wait(120)
    return run, rc


def _config_errors(run) -> list[str]:
    return [line for e in run.of("trainer_config_error") for line in e["errors"]]


RAISES_AFTER_INIT = """\
import torch.distributed as dist
dist.init_process_group("gloo")
raise RuntimeError("boom after init_process_group")
"""


def test_a_traceback_raised_after_init_process_group_reaches_the_pod_log(trainer_env, launch, tmp_path):
    """torch's _distributed_excepthook buffers stderr around the hook it wraps (ours): the
    traceback used to vanish with the worker's exit, leaving only torchrun's `exitcode: 1`."""
    run, rc = _run(trainer_env, launch, tmp_path, RAISES_AFTER_INIT)
    assert rc == 1  # a RuntimeError may be cured by a restart: torchrun's code
    stderr = run.err_path.read_text()
    assert "Traceback (most recent call last)" in stderr, run.stderr_tail()
    assert "RuntimeError: boom after init_process_group" in stderr
    errors = run.of("worker_error")
    assert [(e["type"], e["message"], e["rank"]) for e in errors] == [("RuntimeError", "boom after init_process_group", 0)]


def test_a_hook_that_replaced_the_launcher_s_still_leaves_the_error_reported(trainer_env, launch, tmp_path):
    """An image's sitecustomize (run after the launcher's) sets its own sys.excepthook, keeping
    nothing of the launcher's: the launcher's goes back on top of it."""
    image = tmp_path / "image"
    image.mkdir()
    (image / "sitecustomize.py").write_text(
        "import sys\nsys.excepthook = lambda t, v, tb: sys.stderr.write(f'image hook: {v}\\n')\n")
    env = trainer_env(PET_NPROC_PER_NODE="1")
    env["PYTHONPATH"] = f"{image}:{env['PYTHONPATH']}"
    script = tmp_path / "script.py"
    script.write_text("raise ValueError('lr must be positive')\n")
    run = launch(env, command=[str(script)])
    assert run.wait(120) == 2, run.stderr_tail()
    stderr = run.err_path.read_text()
    assert "image hook: lr must be positive" in stderr  # the image's hook still ran
    assert "ValueError: lr must be positive" in stderr and "Traceback" in stderr
    assert [e["type"] for e in run.of("worker_error")] == ["ValueError"]


ARGPARSE = """\
import argparse
parser = argparse.ArgumentParser(prog="train")
parser.add_argument("--lr", type=float, default=0.1)
parser.parse_args()
"""


def test_a_bad_command_line_flag_exits_2_with_argparse_s_line(trainer_env, launch, tmp_path):
    run, rc = _run(trainer_env, launch, tmp_path, ARGPARSE, "--learning-rate", "3")
    assert rc == 2, run.stderr_tail()
    assert any("train: error: unrecognized arguments: --learning-rate 3" in line for line in _config_errors(run)), \
        _config_errors(run)


@pytest.mark.parametrize("max_restarts", ["0", "2"])  # 2: the worker is a fork of torchrun (launcher.preloaded_workers)
def test_a_missing_submodule_exits_2(trainer_env, launch, tmp_path, max_restarts):
    """`-m launcher.no_such_trainer`: its package exists, so only the worker (runpy) can tell."""
    run = launch(trainer_env(PET_NPROC_PER_NODE="1", PET_MAX_RESTARTS=max_restarts),
                 command=["-m", "launcher.no_such_trainer"])
    assert run.wait(120) == 2, run.stderr_tail()
    assert not run.of("worker_error"), run.of("worker_error")
    assert any("No module named launcher.no_such_trainer" in line for line in _config_errors(run)), _config_errors(run)


@pytest.mark.parametrize(("command", "reported"), [
    (["missing_train.py"], "training script 'missing_train.py' does not exist"),
    (["-m", "no_such_package.train"], "no module named 'no_such_package'"),
])
def test_a_command_that_cannot_start_exits_2_before_torchrun(trainer_env, launch, command, reported):
    run = launch(trainer_env(PET_NPROC_PER_NODE="1"), command=command)
    assert run.wait(60) == 2
    assert any(reported in line for line in _config_errors(run)), run.stderr_tail()
    assert not run.of("launcher_start")  # torchrun never started


def test_torch_absent_is_a_config_error():
    from launcher import startup

    problems = startup.command_problems(["train.py"], find_spec=lambda name: None if name == "torch" else object(),
                                        cwd="/")
    assert any(p.startswith("torch is not installed") for p in problems), problems


STEPS_ALONE = """\
import torch
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
print("trained alone")
"""


def test_a_gang_whose_workers_train_alone_exits_2_at_the_first_step(trainer_env, launch, tmp_path):
    run, rc = _run(trainer_env, launch, tmp_path, STEPS_ALONE, nproc=2)
    assert rc == 2, run.stderr_tail()
    errors = _config_errors(run)
    assert any("the gang is not one run" in line and "in no process group" in line for line in errors), errors
    assert "trained alone" not in run.err_path.read_text()


def test_a_default_process_group_of_another_size_fails_at_once(trainer_env, launch, tmp_path):
    port = free_port()
    script = ("import os, torch.distributed as dist\n"
              "os.environ.pop('TORCHELASTIC_USE_AGENT_STORE')  # a store of its own, as for a group of its own\n"
              f"dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{{{port} + int(os.environ[\"LOCAL_RANK\"])}}', "
              "world_size=1, rank=0)\n"
              "print('initialized alone')\n")
    run, rc = _run(trainer_env, launch, tmp_path, script, nproc=2)
    assert rc == 2, run.stderr_tail()
    assert any("in a process group of world size 1" in line for line in _config_errors(run)), _config_errors(run)
    assert "initialized alone" not in run.err_path.read_text()


def test_workers_that_train_alone_on_purpose_say_so(trainer_env, launch, tmp_path):
    run, rc = _run(trainer_env, launch, tmp_path, STEPS_ALONE, nproc=2, TRAIN_INDEPENDENT_WORKERS="true")
    assert rc == 0, run.stderr_tail()


@pytest.mark.parametrize(("env", "world", "modules", "cuda", "expected"), [
    ({"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1"}, 2, {}, False, None),
    ({"PET_NNODES": "1", "PET_NPROC_PER_NODE": "1"}, None, {}, False, None),  # one worker: nothing to check
    ({"PET_NNODES": "2", "TRAIN_INDEPENDENT_WORKERS": "true"}, None, {}, False, None),
    ({"PET_NNODES": "2"}, None, {"lightning": 1}, False, "Lightning was not told the node count"),
    ({"PET_NNODES": "2"}, None, {"transformers": 1}, False, "use_cpu=True"),
    ({"PET_NNODES": "2"}, None, {"transformers": 1}, True, "the framework was not told the node count"),
    ({"PET_NNODES": "2", "PET_NPROC_PER_NODE": "4"}, 4, {}, True, "in a process group of world size 4"),
])
def test_the_gang_check(env, world, modules, cuda, expected):
    from launcher import worker_gang

    problem = worker_gang.gang_problem(worker_gang.expected_world_size(env), world,
                                       worker_gang.likely_causes(modules, cuda))
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem, problem


@pytest.mark.parametrize(("mode", "expected"), [
    ("distributed", None),
    ("not_parallel", "HF TrainingArguments.parallel_mode is 'not_parallel'"),
])
def test_hf_s_own_verdict_counts_even_with_a_process_group(mode, expected):
    import enum

    from launcher import worker_gang

    args = type("Args", (), {"parallel_mode": enum.Enum("ParallelMode", {"X": mode}).X})()
    alone = worker_gang.hf_training_alone(args)
    problem = worker_gang.gang_problem(2, 2, ["a CPU/GPU device mismatch"], alone)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem, problem



@pytest.mark.parametrize("max_restarts", ["0", "2"])  # 2: a fork of torchrun, device_mesh imported before the hooks
def test_init_device_mesh_gets_the_bounded_collective_timeout(trainer_env, launch, tmp_path, max_restarts):
    """init_device_mesh calls torch.distributed.device_mesh's own copy of init_process_group."""
    script = "from torch.distributed.device_mesh import init_device_mesh\ninit_device_mesh('cpu', (1,))\n"
    run, rc = _run(trainer_env, launch, tmp_path, script, PET_MAX_RESTARTS=max_restarts, TRAIN_COLLECTIVE_TIMEOUT_S="10")
    assert rc == 0, run.stderr_tail()
    assert [e["bound_s"] for e in run.of("collective_timeout_bounded")] == [10.0], run.stderr_tail()
