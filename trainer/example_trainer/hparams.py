"""The example trainer's hyperparameters file: its keys, their defaults and rules, read strictly.

Every problem of the file is reported at once (ConfigError), before any model or data exists; the
launcher turns the worker's exit code 2 into a config error that is not restarted. A module of its
own: the trainer and `python -m example_trainer.pack_data --hparams` both read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import yaml

# The data set's parameters (example_trainer.pack_data packs to them); a hyperparameters file's
# `data` mapping overrides them.
DEFAULT_PARAMS = {
    "seed": 1234,
    "shards": 4,
    "samples_per_shard": 8192,
    "dim": 32,
    "classes": 10,
    "noise": 0.5,
}


HPARAM_DEFAULTS = {
    "seed": 0,
    "steps": 2000,
    "batch_size": 64,
    "lr": 0.003,
    "weight_decay": 0.0,
    "hidden": 128,
    "log_every": 1,
    "num_workers": 2,
    "prefetch_factor": 4,
    "pg_timeout_s": 600,
    # The bound on the checkpoint group's collectives. Ranks that write nothing (all but rank 0
    # for DDP state) wait in them for the slowest writer's whole write, which for a large state on
    # a shared file system can take far longer than any collective of the loop: pg_timeout_s
    # there failed every save. A dead peer still fails the loop within pg_timeout_s.
    "checkpoint_timeout_s": 3600,
    "checkpoint_cost_estimate_s": 30.0,
    "checkpoint_min_interval_s": 60.0,
    "device": "auto",  # auto | cpu | cuda
    "data": {},  # overrides of DEFAULT_PARAMS
    # Test hooks, off by default.
    "step_delay_s": 0.0,  # sleep after every step (slows a tiny model down)
    "stall_after_steps": 0,  # >0: stop making progress after that step
}


@dataclass(frozen=True)
class Number:
    """What a number-valued hyperparameter accepts: an integer (never a bool, a float or a
    quoted string) or any finite number, from `low` (excluded if `above`) to `high`."""

    integer: bool
    low: int
    high: float = math.inf
    above: bool = False

    def problem(self, value: Any) -> str | None:
        """Why `value` is refused, or None."""
        number = isinstance(value, int if self.integer else (int, float)) and not isinstance(value, bool)
        # An int is exact at any size (math.isfinite would overflow converting a huge one to float).
        if number and (isinstance(value, int) or math.isfinite(value)) \
                and (value > self.low if self.above else value >= self.low) \
                and value <= self.high:
            return None
        kind = "an integer" if self.integer else "a number"
        if self.high == math.inf:
            bounds = f"{'>' if self.above else '>='} {self.low}"
        else:
            bounds = f"> {self.low} and <= {self.high}" if self.above else f"from {self.low} to {self.high}"
        hint = ""
        if isinstance(value, str) and _looks_numeric(value):
            hint = (" (YAML read it as text: write it unquoted, with a decimal point and a signed exponent, "
                    "e.g. 3.0e-4 or 1.0e+15)")
        return f"must be {kind} {bounds}, got {value!r}{hint}"


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


SEED = Number(integer=True, low=0, high=2**32 - 1)
# Seconds: a year at most. datetime.timedelta (the process group's timeout) overflows past about
# 8.6e13 s, which would otherwise surface inside init_process_group, after the nodes are up.
SECONDS_LIMIT = 365 * 86400  # torch.Generator.manual_seed takes 64 bits: room for the epoch
# Every key the trainer reads, checked before any process group exists: a bad value is exit 2
# (the launcher's contract: a config error fails the JobSet at once) instead of a traceback
# after the nodes are up that consumes the job's restarts.
HPARAM_RULES: dict[str, Number | tuple[str, ...]] = {
    "seed": SEED,
    "steps": Number(integer=True, low=1),
    "batch_size": Number(integer=True, low=1),
    "lr": Number(integer=False, low=0, above=True),
    "weight_decay": Number(integer=False, low=0),
    "hidden": Number(integer=True, low=1),
    "log_every": Number(integer=True, low=1),
    # Upper bounds catch typos: every worker is a process, every prefetched block 4 MiB of ring.
    "num_workers": Number(integer=True, low=0, high=64),
    "prefetch_factor": Number(integer=True, low=1, high=64),
    "pg_timeout_s": Number(integer=False, low=0, high=SECONDS_LIMIT, above=True),
    "checkpoint_timeout_s": Number(integer=False, low=0, high=SECONDS_LIMIT, above=True),
    "checkpoint_cost_estimate_s": Number(integer=False, low=0, high=SECONDS_LIMIT, above=True),
    "checkpoint_min_interval_s": Number(integer=False, low=0, high=SECONDS_LIMIT),
    "device": ("auto", "cpu", "cuda"),
    "step_delay_s": Number(integer=False, low=0, high=SECONDS_LIMIT),
    "stall_after_steps": Number(integer=True, low=0),
}
DATA_RULES: dict[str, Number] = {
    "seed": SEED,
    "shards": Number(integer=True, low=1),
    "samples_per_shard": Number(integer=True, low=1),
    "dim": Number(integer=True, low=1),
    "classes": Number(integer=True, low=2),
    "noise": Number(integer=False, low=0),
}


class ConfigError(Exception):
    """The hyperparameters file is unusable; `errors` has one line per problem."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def load_hparams(path: str) -> dict:
    where = f"TRAIN_HPARAMS_FILE {path!r}"
    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError([f"{where}: {e.strerror}"]) from e
    except yaml.YAMLError as e:
        raise ConfigError([f"{where}: invalid YAML ({e})".replace("\n", " ")]) from e
    if not isinstance(raw, dict):
        raise ConfigError([f"{where}: top level must be a mapping"])
    unknown = sorted(set(raw) - set(HPARAM_DEFAULTS), key=str)
    if unknown:
        raise ConfigError([f"{where}: unknown keys {unknown}; known: {sorted(HPARAM_DEFAULTS)}"])
    hp = {**HPARAM_DEFAULTS, **raw}
    errors = []
    for key, rule in HPARAM_RULES.items():
        if isinstance(rule, Number):
            problem = rule.problem(hp[key])
        else:
            problem = None if hp[key] in rule else f"must be one of {', '.join(rule)}, got {hp[key]!r}"
        if problem:
            errors.append(f"{where}: {key} {problem}")
    data = hp["data"] if hp["data"] is not None else {}
    if not isinstance(data, dict):
        errors.append(f"{where}: data must be a mapping of {sorted(DATA_RULES)}, got {data!r}")
        data = {}
    bad_data = sorted(set(data) - set(DATA_RULES), key=str)
    if bad_data:
        errors.append(f"{where}: unknown data keys {bad_data}; known: {sorted(DATA_RULES)}")
    for key in sorted(set(data) & set(DATA_RULES)):
        problem = DATA_RULES[key].problem(data[key])
        if problem:
            errors.append(f"{where}: data.{key} {problem}")
    per_shard = data.get("samples_per_shard", DEFAULT_PARAMS["samples_per_shard"])
    if not errors and hp["batch_size"] > per_shard:  # a chunk is batch_size samples of one shard
        errors.append(f"{where}: batch_size {hp['batch_size']} is larger than data.samples_per_shard "
                      f"{per_shard}: lower it, or raise data.samples_per_shard")
    if errors:
        raise ConfigError(errors)
    hp["data"] = data
    return hp
