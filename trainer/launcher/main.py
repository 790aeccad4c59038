"""python -m launcher [--dry-run] [--] <training command ...>

Reads the TRAIN_* and PET_* contract from the environment, validates it, picks the latest
complete checkpoint, and runs the training command under torchrun with c10d
rendezvous. See trainer/README.md for the contract.

How a run ends is an Outcome; launcher.outcome.OUTCOMES gives its exit code and what the JobSet
does with it (the table in trainer/README.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping

from . import checkpoint, contract, dataset_manifest, fabric, gang, inplace, progress, startup, worker_site
from .outcome import STOPPED_CODE, Outcome, exit_code
from .resume_choice import LEGACY_DIR_VAR, select_resume
from .run_status import RunStatus, Schedule
from .startup import PYTHON_WORDS, UsageError
from .status_publisher import FINAL_PUBLISH_WAIT_S, StatusPublisher, patch_from_env
from .supervisor import TORCHRUN_EXIT_GRACE_S, StopRequest, Supervisor, WorkerWatch, route_output

__all__ = ["LEGACY_DIR_VAR", "PYTHON_WORDS", "TORCHRUN_EXIT_GRACE_S", "UsageError", "WorkerWatch", "main",
           "route_output", "select_resume", "torchrun_command"]

USAGE = """\
usage: python -m launcher [--dry-run] [--] COMMAND...

COMMAND is what torchrun starts on every local rank:
  -m package.module [ARGS...]   a Python module
  path/to/script.py [ARGS...]   a Python script
  python[3] ...                 the same (the interpreter word is dropped)
  /path/to/executable [ARGS...] anything else (torchrun --no-python)

Configuration comes from TRAIN_* and torchrun's PET_* environment variables
(trainer/README.md).
--dry-run prints the torchrun command and the resolved environment as one
JSON line and exits without starting anything.
"""

EXIT_STOPPED = STOPPED_CODE  # what a stopped trainer exits with, whichever signal it got


def parse_args(argv: list[str]) -> tuple[dict, list[str]]:
    opts = {"dry_run": False, "help": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a in ("-h", "--help"):
            opts["help"] = True
        elif a == "--dry-run":
            opts["dry_run"] = True
        else:
            break
        i += 1
    return opts, argv[i:]


def torchrun_command(c: contract.Contract, command: list[str], *, in_place: bool = False) -> list[str]:
    """The torchrun invocation for a validated contract and training command. The gang's size it
    reads from its own PET_NNODES and PET_NPROC_PER_NODE (the contract's, checked and written back:
    launcher.contract), its restart rounds (launcher.inplace) from PET_MAX_RESTARTS (0 when unset).
    With them on, a Python command's workers are forks of torchrun (launcher.preloaded_workers): a
    round's new workers skip the interpreter start and torch import, most of a round's time. The
    rendezvous is the launcher's: c10d, pod 0's endpoint (waited for and told whether it hosts,
    launcher.gang) and the job id, which is also the run's name."""
    command = startup.training_command(command)
    python_mode = startup.is_python(command)
    runner = "launcher.preloaded_workers" if in_place and python_mode else "torch.distributed.run"
    cmd = [
        sys.executable, "-m", runner,
        "--rdzv-backend", "c10d",
        "--rdzv-endpoint", c.rdzv_endpoint,
        "--rdzv-id", c.job_id,
    ]
    if not python_mode:
        cmd.append("--no-python")
    return cmd + command


def error(msg: str, outcome: Outcome = Outcome.CONTRACT_ERROR) -> int:
    """One line on stderr; the exit code of `outcome`."""
    sys.stderr.write(f"launcher: error: {msg}\n")
    sys.stderr.flush()
    return exit_code(outcome)


def prepare_dirs(c: contract.Contract, *, hparams_given: bool = True) -> None:
    """Create what the launcher owns; raise contract.ContractError naming the variable. The
    hyperparameters file is checked only when the workload names one: a trainer may read its
    settings from its command line alone."""
    errors = []
    try:
        os.makedirs(c.checkpoint_dir, exist_ok=True)
        if not os.access(c.checkpoint_dir, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except OSError as e:
        errors.append(f"TRAIN_CHECKPOINT_DIR {c.checkpoint_dir!r} is not usable: {e.strerror or e}")
    try:
        if hparams_given:
            with open(c.hparams_file, "rb"):
                pass
            if not os.path.isfile(c.hparams_file):
                raise IsADirectoryError(21, "not a regular file")
    except OSError as e:
        errors.append(f"TRAIN_HPARAMS_FILE {c.hparams_file!r} is not readable: {e.strerror or e}")
    try:
        os.makedirs(os.path.dirname(c.heartbeat_file), exist_ok=True)
        # A heartbeat from an earlier container must not satisfy the probes, nor its config error
        # fail this one, nor its stop excuse this one's failure.
        for stale in (c.heartbeat_file, contract.config_error_file(c.heartbeat_file),
                      contract.stopped_file(c.heartbeat_file), contract.finished_file(c.heartbeat_file),
                      contract.worker_failed_file(c.heartbeat_file)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
    except OSError as e:
        errors.append(f"TRAIN_HEARTBEAT_FILE {c.heartbeat_file!r} is not usable: {e.strerror or e}")
    if errors:
        raise contract.ContractError(errors)


def _config_errors(path: str) -> list[str]:
    """The lines a trainer wrote to TRAIN_CONFIG_ERROR_FILE, if it did."""
    try:
        with open(path, errors="replace") as f:
            return [line.strip() for line in f.read(64 << 10).splitlines() if line.strip()]
    except OSError:
        return []


def _stopped(path: str) -> dict | None:
    """What a trainer wrote to TRAIN_STOPPED_FILE, if it did."""
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else {}


def classify(torchrun_rc: int, *, signalled: bool, config_errors: list[str], stopped: dict | None,
             finished: bool) -> tuple[Outcome, tuple[str, dict] | None]:
    """The run's outcome from torchrun's exit code and what the workers reported, with the event
    that explains it where torchrun's code alone would not. A stop never ends a pod as finished:
    after a stop signal (or a peer's gang stop, which the stopped file reports), a worker exit 0
    is a finished run only when the trainer declared training finished; otherwise it is a stopped
    gang, whose 143 restarts the gang without spending `maxRestarts` (Lightning, for one, exits 0
    on SIGTERM mid-run)."""
    if torchrun_rc == 0:
        if finished or not (signalled or stopped is not None):
            return Outcome.FINISHED, None  # a plain script that ran to its end declares nothing
        return Outcome.STOPPED, ("trainer_exit_0_unfinished", {"signalled": signalled, "step": (stopped or {}).get("step")})
    if stopped is not None:
        # The workers stopped with their gang after saving (this pod got the signal, or another
        # did): a disruption, whose exit code restarts the gang without spending a restart.
        return Outcome.STOPPED, ("trainer_stopped", {"step": stopped.get("step"), "signal": stopped.get("signal")})
    if finished and signalled:
        # Training had finished when the signal came (torchrun waiting for the other pods in its
        # exit barrier, signalled itself): still a finished run.
        return Outcome.FINISHED, ("trainer_finished_before_signal", {"torchrun_rc": torchrun_rc})
    if config_errors:
        # torchrun's 1 would spend a restart on a config that cannot work
        return Outcome.TRAINER_CONFIG_ERROR, ("trainer_config_error", {"errors": config_errors})
    if signalled:
        # A signal, and no stop after a save: the probes killing a hung trainer, or workers that
        # died before they could stop. Exit 143 would pass for a disruption (the JobSet rule
        # `stopped`) and a hang would restart without spending `maxRestarts`; an evicted pod is
        # a disruption by its DisruptionTarget condition whatever its exit code.
        return Outcome.NOT_STOPPED, ("trainer_not_stopped", {"torchrun_rc": torchrun_rc})
    return Outcome.WORKER_FAILED, None


def _stopped_early(stop_request: StopRequest, started: float) -> int:
    """The exit of a launcher stopped before torchrun started: no worker had anything to save."""
    signum = stop_request.signum or signal.SIGTERM
    rc = exit_code(Outcome.STOPPED_BEFORE_START, 128 + signum)
    progress.log("launcher_exit", rc=rc, outcome=Outcome.STOPPED_BEFORE_START.value, torchrun_rc=None,
                 signal=signal.Signals(signum).name, duration_s=round(time.monotonic() - started, 3))
    return rc


def _worker_env(c: contract.Contract, resume: str, on_fabric: str) -> tuple[dict[str, str], str]:
    """The workers' environment (the contract resolved, the files they report through, the worker
    site first on PYTHONPATH) and the NCCL log directory."""
    env = dict(os.environ)
    env.update(c.to_env())
    env[contract.RESUME_VAR] = resume
    env[contract.CONFIG_ERROR_VAR] = contract.config_error_file(c.heartbeat_file)
    env[contract.STOPPED_VAR] = contract.stopped_file(c.heartbeat_file)
    env[contract.FINISHED_VAR] = contract.finished_file(c.heartbeat_file)
    env[contract.WORKER_FAILED_VAR] = contract.worker_failed_file(c.heartbeat_file)
    env["PYTHONPATH"] = worker_site.python_path(env.get("PYTHONPATH", ""))
    nccl_log_dir = env.get(fabric.LOG_DIR_VAR) or fabric.DEFAULT_LOG_DIR
    if on_fabric == "efa":
        env.update(fabric.nccl_log_env(env, nccl_log_dir))
    return env, nccl_log_dir


def _wait_for_pod0(c: contract.Contract, rdzv_wait_s: float, stop_request: StopRequest, started: float) -> int | None:
    """On a pod other than pod 0: wait for its rendezvous store. An exit code, or None to go on."""
    try:
        waited = gang.wait_for_rendezvous(c.rdzv_host, c.rdzv_port, rdzv_wait_s,
                                          stop_requested=lambda: stop_request.signum is not None)
    except gang.StopRequestedError:
        return _stopped_early(stop_request, started)
    except gang.GangError as e:
        progress.log("rendezvous_unreachable", endpoint=c.rdzv_endpoint, wait_s=rdzv_wait_s)
        return error(str(e), Outcome.RENDEZVOUS_UNREACHABLE)
    progress.log("rendezvous_reachable", endpoint=c.rdzv_endpoint, waited_s=round(waited, 3))
    return None


def run_status(c: contract.Contract, env: Mapping[str, str], restart_attempt: int | None,
               latest: checkpoint.CheckpointInfo | None) -> RunStatus:
    """The run's figures as this start knows them: its restarts, its schedule, the checkpoint it resumes."""
    resumed = None
    if latest is not None:
        with contextlib.suppress(OSError):
            resumed = (latest.step, os.stat(latest.path).st_mtime)
    total = env.get(TOTAL_STEPS_VAR, "").strip()
    return RunStatus(restarts=restart_attempt, total_steps=int(total) if total.isdigit() and int(total) > 0 else None,
                     schedule=Schedule(c.mtbf_s, c.checkpoint_interval_s, c.checkpoint_every_steps), resumed=resumed)


def _supervise(cmd: list[str], env: dict[str, str], c: contract.Contract, stop_request: StopRequest,
               fabrics: tuple[str, fabric.Expected], nccl_log_dir: str, started: float, status: RunStatus,
               in_place: inplace.InPlace | None = None) -> int:
    """Run torchrun to its end and turn what it and the workers reported into the pod's exit code."""
    sup = Supervisor(cmd, env, stop_request, grace_s=c.termination_grace_s, observe=status.observe,
                     restart_wait_s=in_place.restart_wait_s if in_place else None)
    publisher = StatusPublisher(status, patch_from_env(os.environ))
    publisher.start()
    try:
        return _supervised(sup, env, stop_request, fabrics, nccl_log_dir, started)
    finally:
        # After a stop signal every second until the kubelet's SIGKILL is the workers' and the
        # exit's: the last figures are then left to the thread, unawaited.
        publisher.stop(wait_s=0 if sup.received is not None else FINAL_PUBLISH_WAIT_S)


def _supervised(sup: Supervisor, env: dict[str, str], stop_request: StopRequest,
                fabrics: tuple[str, fabric.Expected], nccl_log_dir: str, started: float) -> int:
    on_fabric, node_fabric = fabrics
    watch = fabric.FabricWatch(nccl_log_dir, on_failure=lambda _check: sup.stop(),
                               check=fabric.NetworkCheck(expected=node_fabric),
                               on_status=lambda check: progress.log("fabric_status", verdict=check.verdict,
                                                                    **check.summary()),
                               ).start() if on_fabric == "efa" else None
    try:
        torchrun_rc = sup.run()
    except OSError as e:
        return error(f"cannot start torchrun: {e}", Outcome.TORCHRUN_NOT_STARTED)
    if torchrun_rc is None:  # the stop came between the check above and the start
        return _stopped_early(stop_request, started)
    outcome, why = classify(
        torchrun_rc,
        signalled=sup.received is not None,
        config_errors=_config_errors(env[contract.CONFIG_ERROR_VAR]) if sup.received is None else [],
        stopped=_stopped(env[contract.STOPPED_VAR]),
        finished=os.path.exists(env[contract.FINISHED_VAR]),
    )
    if why is not None:
        event, fields = why
        progress.log(event, **fields)
    network = watch.finish() if watch else None
    if network is not None:
        progress.log("fabric_check", fabric=on_fabric, verdict=network.verdict,
                     evidence=network.failure_line or network.efa_seen, **network.summary())
        if network.failure:
            outcome = Outcome.WRONG_NETWORK
            error(fabric.failure_message(network), outcome)
    rc = exit_code(outcome, torchrun_rc)
    progress.log("launcher_exit", rc=rc, outcome=outcome.value, torchrun_rc=torchrun_rc,
                 signal=signal.Signals(sup.received).name if sup.received else None,
                 duration_s=round(time.monotonic() - started, 3))
    return rc


# Optional: the run's total optimizer steps, for the ETA of its progress (launcher.run_status).
TOTAL_STEPS_VAR = "TRAIN_TOTAL_STEPS"


def main(argv: list[str] | None = None) -> int:
    """Prepare (contract, command, resume choice, environment), wait for pod 0, supervise."""
    stop_request = StopRequest()
    stop_request.install()
    argv = sys.argv[1:] if argv is None else argv
    opts, command = parse_args(argv)
    if opts["help"]:
        sys.stdout.write(USAGE)
        return exit_code(Outcome.PRINTED_ONLY)
    try:
        c = contract.from_env(os.environ)
        in_place = inplace.from_env(os.environ)
        cmd = torchrun_command(c, command, in_place=in_place is not None and in_place.forked_workers)
        fabrics = (fabric.fabric_of(os.environ), fabric.expected_of(os.environ))
        restart_attempt = gang.check_restart_budget(os.environ)
        rdzv_wait_s = gang.rendezvous_wait_seconds(os.environ)
    except gang.RestartBudgetSpentError as e:
        return error(str(e), Outcome.RESTART_BUDGET_SPENT)
    except (contract.ContractError, UsageError, fabric.FabricError, gang.GangError, inplace.InPlaceError) as e:
        return error(str(e))
    problems = startup.command_problems(startup.training_command(command))
    if problems:  # a config error that no restart cures, reported as the workers' are
        progress.log("trainer_config_error", errors=problems)
        return error("; ".join(problems))
    is_rdzv_host = gang.hosts_rendezvous(c.rdzv_host, socket.gethostname())
    cmd = gang.with_rendezvous_conf(cmd, is_rdzv_host, gang.join_timeout_seconds(rdzv_wait_s),
                                    os.environ.get("PET_RDZV_CONF", ""))

    latest, skipped = select_resume(c.checkpoint_dir, os.environ)
    resume = latest.path if latest else ""
    env, nccl_log_dir = _worker_env(c, resume, fabrics[0])
    if in_place:
        env.update(inplace.SHARED_STORE_OPT_OUT)
    if opts["dry_run"]:
        progress.log("dry_run", cmd=cmd, env={k: v for k, v in sorted(env.items()) if k.startswith(("TRAIN_", "PET_"))})
        return exit_code(Outcome.PRINTED_ONLY)
    try:
        prepare_dirs(c, hparams_given=bool(os.environ.get("TRAIN_HPARAMS_FILE", "").strip()))
        dataset = dataset_manifest.check(c.data_dir, os.environ)
    except (contract.ContractError, dataset_manifest.DatasetIncompleteError) as e:
        return error(str(e))
    if dataset is not None:
        progress.log("dataset_complete", manifest=dataset.manifest, files=dataset.files, bytes=dataset.bytes)

    started = time.monotonic()
    progress.log("launcher_start", job_id=c.job_id, host=socket.gethostname(), nnodes=c.nnodes,
                 nproc_per_node=c.nproc_per_node, rdzv_endpoint=c.rdzv_endpoint, checkpoint_dir=c.checkpoint_dir,
                 command=command,
                 restart_attempt=restart_attempt,  # the gang's restarts so far (a CloudWatch metric)
                 inplace_restarts=in_place.restarts if in_place else 0)
    progress.log("resume_selected", path=resume, step=latest.step if latest else None,
                 skipped=checkpoint.describe(skipped))
    if is_rdzv_host is False and c.nnodes > 1:
        rc = _wait_for_pod0(c, rdzv_wait_s, stop_request, started)
        if rc is not None:
            return rc
    if stop_request.signum is not None:
        return _stopped_early(stop_request, started)
    return _supervise(cmd, env, c, stop_request, fabrics, nccl_log_dir, started,
                      run_status(c, os.environ, restart_attempt, latest), in_place)
