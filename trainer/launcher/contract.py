"""The environment-variable contract between the Kubernetes workload and the image.

Every variable, its default and who sets it is documented in trainer/README.md.
`from_env` is a pure function of the mapping it is given: it never touches the
file system, so it can be table-tested. `ContractError` carries one message per
invalid variable, each naming the variable.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

# torchrun's own settings for the gang's size, which it reads from PET_<FLAG> when its flag is not
# given (torch/distributed/run.py, argparse_util.env; torch 2.13.0), as kubeflow/trainer sets them.
# The launcher passes no flag for them, and checks them all the same: it needs both numbers (a pod
# other than pod 0 waits for it only in a gang of several; the workers' gang check,
# launcher.worker_gang), and torchrun answers a bad value with a traceback and exit 1
# (PET_NNODES=abc: ValueError in parse_min_max_nnodes; PET_NPROC_PER_NODE=0: AssertionError in
# WorkerSpec), which would spend a gang restart on a setting no restart cures (exit 2 here).
NNODES_VAR = "PET_NNODES"
NPROC_PER_NODE_VAR = "PET_NPROC_PER_NODE"
# What these were called before they were torchrun's own. For one release the workload sets both
# names (an image built before this change reads only the old one, and would otherwise pass torchrun
# `--nnodes 1`: each pod of the gang training alone); an old name is accepted only when it says the
# same as the new one, and refused with the fix otherwise.
RENAMED = {"TRAIN_NNODES": NNODES_VAR, "TRAIN_NPROC_PER_NODE": NPROC_PER_NODE_VAR}

DEFAULTS: dict[str, str] = {
    NNODES_VAR: "1",
    NPROC_PER_NODE_VAR: "1",
    "TRAIN_RDZV_HOST": "localhost",
    "TRAIN_RDZV_PORT": "29400",
    "TRAIN_CHECKPOINT_DIR": "/workspace/checkpoints",
    "TRAIN_DATA_DIR": "/workspace/data",
    "TRAIN_HPARAMS_FILE": "/etc/trainer/hparams.yaml",
    "TRAIN_MTBF_S": str(6 * 3600),
    "TRAIN_CHECKPOINT_KEEP": "3",
    "TRAIN_HEARTBEAT_FILE": "/tmp/trainer/heartbeat",
    # The bound on the default process group's timeout (launcher.worker_hooks): a frozen peer fails
    # the gang after this long, not after the frameworks' own 1800 s. Groups a trainer makes with
    # `new_group` keep the timeout it gives them (e.g. a checkpoint group's longer one).
    "TRAIN_COLLECTIVE_TIMEOUT_S": "600",
    # How often rank 0 logs a `step` line from the optimizer-step hook (launcher.autoprogress).
    "TRAIN_LOG_EVERY_STEPS": "10",
}

# What the launcher keeps of the grace period for itself: after a stop signal it ends its
# workers and torchrun at TRAIN_TERMINATION_GRACE_S minus this, logs and exits before the SIGKILL.
# The stack's grace check (components/facts/file_systems.py, STOP_MARGIN_S there) must cover it.
STOP_MARGIN_S = 5.0

# TRAIN_TERMINATION_GRACE_S (optional: unset or empty means "not given") is the pod's
# terminationGracePeriodSeconds: the kubelet's SIGKILL comes this long after its SIGTERM, and the
# launcher ends by STOP_MARGIN_S before it (launcher.supervisor).
# Unset, the launcher leaves working workers to the kubelet and bounds only torchrun's exit barrier
# after a stop, by Kubernetes' default grace (UNSTATED_GRACE_S).
UNSTATED_GRACE_S = 30.0

# Set by the launcher for the trainer, never read from the workload.
RESUME_VAR = "TRAIN_RESUME_FROM"
# A trainer that finds its own configuration unusable writes one line per problem to this file
# and exits 2. torchrun turns any failed worker into its own exit 1, which would spend one of
# the job's restarts; the launcher exits 2 instead when the file is there (a config error fails
# the JobSet at once).
CONFIG_ERROR_VAR = "TRAIN_CONFIG_ERROR_FILE"


# A trainer that stopped with its gang (a stop signal on any pod, agreed on at a step boundary,
# the checkpoint saved) writes this file before it exits 143. Only the pod that got the signal
# knows it was stopped; torchrun on every other pod reports the workers' 143 as its own 1, and a
# Job counts exit 1 as a failure, which spends a restart on a spot reclaim. The launcher exits
# 143 instead when the file is there.
STOPPED_VAR = "TRAIN_STOPPED_FILE"

# A trainer whose training finished (the framework reported completion, or a plain loop ran its
# last step) writes this file before it exits 0. After a stop signal, a worker's exit 0 counts as
# a finished run only with this file: frameworks such as Lightning end on SIGTERM with exit 0 of
# their own, which would complete the Job mid-run.
FINISHED_VAR = "TRAIN_FINISHED_FILE"

# The reports after which no in-place restart round may run (launcher.inplace, launcher.supervisor),
# each named as the launcher says it, with the variable that holds its file.
RUN_ENDING_REPORTS = (("a config error", CONFIG_ERROR_VAR), ("a stop with the gang", STOPPED_VAR))


def config_error_file(heartbeat_file: str) -> str:
    """Where the trainer reports a config error: next to the heartbeat, on the pod's own disk."""
    return os.path.join(os.path.dirname(heartbeat_file), "config-error")


def stopped_file(heartbeat_file: str) -> str:
    """Where the trainer reports a stop with the gang: next to the heartbeat, like a config error."""
    return os.path.join(os.path.dirname(heartbeat_file), "stopped")


# The launcher's worker hooks write this file when a worker ends with an uncaught error. torchrun
# may then hang on a frozen peer's rendezvous store; with the file there, the launcher stops
# waiting for it (main.WorkerWatch). A worker that succeeded never writes it.
WORKER_FAILED_VAR = "TRAIN_WORKER_FAILED_FILE"


def worker_failed_file(heartbeat_file: str) -> str:
    return os.path.join(os.path.dirname(heartbeat_file), "worker-failed")


def finished_file(heartbeat_file: str) -> str:
    """Where the trainer declares its training finished: next to the heartbeat, like a stop."""
    return os.path.join(os.path.dirname(heartbeat_file), "finished")


_JOB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_HOSTNAME_RE = re.compile(
    r"(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)


class ContractError(ValueError):
    """One or more contract variables are invalid; `errors` has one line each."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Contract:
    nnodes: int
    nproc_per_node: int
    rdzv_host: str
    rdzv_port: int
    job_id: str
    checkpoint_dir: str
    data_dir: str
    hparams_file: str
    checkpoint_interval_s: float | None
    checkpoint_every_steps: int | None
    mtbf_s: float
    checkpoint_keep: int
    heartbeat_file: str
    collective_timeout_s: float
    log_every_steps: int
    termination_grace_s: float | None = None

    @property
    def rdzv_endpoint(self) -> str:
        host = self.rdzv_host
        with contextlib.suppress(ValueError):  # a host name
            if ipaddress.ip_address(host).version == 6:
                host = f"[{host}]"
        return f"{host}:{self.rdzv_port}"

    def to_env(self) -> dict[str, str]:
        """The resolved contract as environment variables (defaults filled in)."""
        return {
            # torchrun reads these two itself (launcher.main.torchrun_command passes no flag for them)
            NNODES_VAR: str(self.nnodes),
            NPROC_PER_NODE_VAR: str(self.nproc_per_node),
            "TRAIN_RDZV_HOST": self.rdzv_host,
            "TRAIN_RDZV_PORT": str(self.rdzv_port),
            "TRAIN_JOB_ID": self.job_id,
            "TRAIN_CHECKPOINT_DIR": self.checkpoint_dir,
            "TRAIN_DATA_DIR": self.data_dir,
            "TRAIN_HPARAMS_FILE": self.hparams_file,
            "TRAIN_MTBF_S": _fmt_num(self.mtbf_s),
            "TRAIN_CHECKPOINT_KEEP": str(self.checkpoint_keep),
            "TRAIN_HEARTBEAT_FILE": self.heartbeat_file,
            "TRAIN_COLLECTIVE_TIMEOUT_S": _fmt_num(self.collective_timeout_s),
            "TRAIN_LOG_EVERY_STEPS": str(self.log_every_steps),
            "TRAIN_TERMINATION_GRACE_S": "" if self.termination_grace_s is None else _fmt_num(self.termination_grace_s),
            "TRAIN_CHECKPOINT_INTERVAL_S": (
                "" if self.checkpoint_interval_s is None else _fmt_num(self.checkpoint_interval_s)
            ),
            "TRAIN_CHECKPOINT_EVERY_STEPS": (
                "" if self.checkpoint_every_steps is None else str(self.checkpoint_every_steps)
            ),
        }


def _fmt_num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _get(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    value = value.strip()
    if value == "":
        return DEFAULTS.get(name, "")
    return value


def _int(env: Mapping[str, str], name: str, errors: list[str], lo: int | None = None, hi: int | None = None) -> int:
    """The value, or 0 after recording why it is unusable (from_env raises before using it)."""
    raw = _get(env, name)
    try:
        value = int(raw, 10)
    except ValueError:
        errors.append(f"{name} must be an integer, got {raw!r}")
        return 0
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if hi is None:
            errors.append(f"{name} must be >= {lo}, got {value}")
        else:
            errors.append(f"{name} must be between {lo} and {hi}, got {value}")
        return 0
    return value


def _pos_float(env: Mapping[str, str], name: str, errors: list[str]) -> float:
    raw = _get(env, name)
    try:
        value = float(raw)
    except ValueError:
        errors.append(f"{name} must be a number of seconds, got {raw!r}")
        return 0.0
    if not (value > 0) or value == float("inf"):
        errors.append(f"{name} must be a positive finite number of seconds, got {raw!r}")
        return 0.0
    return value


def _path(env: Mapping[str, str], name: str, errors: list[str]) -> str:
    raw = _get(env, name)
    if "\x00" in raw:
        errors.append(f"{name} must not contain NUL bytes")
        return ""
    if not raw.startswith("/"):
        errors.append(f"{name} must be an absolute path, got {raw!r}")
        return ""
    return os.path.normpath(raw)


def from_env(env: Mapping[str, str] | None = None) -> Contract:
    """Parse and validate the contract; raise ContractError listing every problem."""
    if env is None:
        env = os.environ
    errors: list[str] = [f"{old} is now torchrun's own {new}: set {new}={env[old].strip()!r} instead (trainer/README.md)"
                         for old, new in RENAMED.items()
                         if env.get(old, "").strip() and env.get(old, "").strip() != env.get(new, "").strip()]
    # Whole numbers only: the gang is fixed (no MIN:MAX range) and the launcher multiplies them
    # (no `gpu` or `auto`, which torchrun resolves on the node).
    nnodes = _int(env, NNODES_VAR, errors, lo=1)
    nproc = _int(env, NPROC_PER_NODE_VAR, errors, lo=1)

    host = _get(env, "TRAIN_RDZV_HOST")
    host_ok = bool(_HOSTNAME_RE.fullmatch(host))
    if not host_ok:
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(host)
            host_ok = True
    if not host_ok:
        errors.append(f"TRAIN_RDZV_HOST must be a host name or IP address, got {host!r}")
    port = _int(env, "TRAIN_RDZV_PORT", errors, lo=1024, hi=65535)

    job_id = env.get("TRAIN_JOB_ID", "").strip()
    if not job_id:
        errors.append("TRAIN_JOB_ID is required (the rendezvous id / run name) but is not set")
    elif not _JOB_ID_RE.fullmatch(job_id):
        errors.append(
            "TRAIN_JOB_ID must be 1-128 characters of [A-Za-z0-9._-] starting with a "
            f"letter or digit, got {job_id!r}"
        )

    checkpoint_dir = _path(env, "TRAIN_CHECKPOINT_DIR", errors)
    data_dir = _path(env, "TRAIN_DATA_DIR", errors)
    hparams_file = _path(env, "TRAIN_HPARAMS_FILE", errors)
    heartbeat_file = _path(env, "TRAIN_HEARTBEAT_FILE", errors)

    interval = None
    if env.get("TRAIN_CHECKPOINT_INTERVAL_S", "").strip():
        interval = _pos_float(env, "TRAIN_CHECKPOINT_INTERVAL_S", errors)
    every_steps = None
    if env.get("TRAIN_CHECKPOINT_EVERY_STEPS", "").strip():
        every_steps = _int(env, "TRAIN_CHECKPOINT_EVERY_STEPS", errors, lo=1)
    mtbf = _pos_float(env, "TRAIN_MTBF_S", errors)
    keep = _int(env, "TRAIN_CHECKPOINT_KEEP", errors, lo=1)
    collective_timeout = _pos_float(env, "TRAIN_COLLECTIVE_TIMEOUT_S", errors)
    log_every = _int(env, "TRAIN_LOG_EVERY_STEPS", errors, lo=1)
    grace = None
    if env.get("TRAIN_TERMINATION_GRACE_S", "").strip():
        grace = _pos_float(env, "TRAIN_TERMINATION_GRACE_S", errors)
    if grace and grace <= STOP_MARGIN_S:
        errors.append(f"TRAIN_TERMINATION_GRACE_S must be more than the launcher's {STOP_MARGIN_S:.0f} s to end "
                      f"after a stop, got {_get(env, 'TRAIN_TERMINATION_GRACE_S')!r}: set the job's "
                      "terminationGracePeriodSeconds to cover the stop checkpoint plus that")

    if errors:
        raise ContractError(errors)
    return Contract(
        nnodes=nnodes,
        nproc_per_node=nproc,
        rdzv_host=host,
        rdzv_port=port,
        job_id=job_id,
        checkpoint_dir=checkpoint_dir,
        data_dir=data_dir,
        hparams_file=hparams_file,
        checkpoint_interval_s=interval,
        checkpoint_every_steps=every_steps,
        mtbf_s=mtbf,
        checkpoint_keep=keep,
        heartbeat_file=heartbeat_file,
        collective_timeout_s=collective_timeout,
        log_every_steps=log_every,
        termination_grace_s=grace,
    )
