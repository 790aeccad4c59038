"""Reading a stack file the way the Pulumi CLI hands it to the program.

Used by the offline plan (offline/plan.py) and by scripts/new-team-stack, which writes a team
stack from its platform's file. A team stack itself judges its jobs against the platform as
deployed (its platform contract, platform_contract.py), not against that file.

A value of `config:` the strict reader refuses (an ambiguous scalar, a repeated key) reaches the
program as a `refused_value` holding the problem, named by its key and worded for the type the
key takes (components/config/keys.py): the schema reports it first, says nothing else of that
key, and judges everything else, so one run lists every problem of the file.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from components.config.keys import expected_type
from components.config.reader import (
    SECRET,
    ConfigError,
    ConfigProblem,
    did_you_mean,
    refused_in,
    refused_problems,
    refused_value,
)
from components.config.strict_yaml import (
    Refused,
    YamlError,
    YamlProblem,
    path_for_message,
    read_yaml_document,
    read_yaml_file,
    refusals_in,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
# The Pulumi CLI's rule for stack names (sdk/go/common/tokens: stackNameAndProjectRegexp); checked
# before the name becomes part of a file name.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
# The top-level keys of a stack settings file (Pulumi's "Stack settings file reference").
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")


def project_file(project_dir: Path = REPO_ROOT) -> dict[str, Any]:
    """The project's Pulumi.yaml, with the keys read here of the right type; ConfigError otherwise."""
    path = project_dir / "Pulumi.yaml"
    shown = path_for_message(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)
    try:
        data, _ = read_yaml_file(path, source=shown)
    except YamlError as problem:
        raise ConfigError(unreadable(shown, problem)) from None
    if not isinstance(data, Mapping):
        raise ConfigError([ConfigProblem(shown, "must be a mapping with `name:`", "write the project file as `key: value` "
                                         "lines", value=f"a {type(data).__name__}")])
    errors = [ConfigProblem(shown, f"`{key}` must be {kind}", "correct it")
              for key, kind, ok in (("name", "the project's name", isinstance(data.get("name"), str) and data["name"]),
                                    ("stackConfigDir", "a directory name", isinstance(data.get("stackConfigDir", "."), str)),
                                    ("config", "a mapping of keys", isinstance(data.get("config") or {}, Mapping)))
              if not ok]
    if errors:
        raise ConfigError(errors)
    return dict(data)


def unreadable(source: str, problem: YamlError) -> list[ConfigProblem]:
    """A file the YAML reader refused: each of its messages starts with the file and names its own fix."""
    return [ConfigProblem(source, message.removeprefix(f"{source}: ")) for message in problem.messages]


def shown_path(path: Path) -> str:
    """A file as messages name it: relative to the repository when inside it."""
    return path_for_message(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


def read_stack_file(path: Path) -> dict[str, Any]:
    """The `config:` block of a stack file, read strictly, with a `Refused` (strict_yaml) in place
    of each value with a problem; ConfigError naming the file otherwise, and for a problem outside
    `config:` (with every other problem of the file: the schema is not judged then)."""
    shown = shown_path(path)
    try:
        parsed, _ = read_yaml_document(path, source=shown)
    except YamlError as problem:
        raise ConfigError(unreadable(shown, problem)) from None
    document = {} if parsed.data is None else parsed.data
    file_problems = unreadable(shown, YamlError(*(problem.message(shown) for problem in parsed.problems)))
    if not isinstance(document, Mapping):
        raise ConfigError([*file_problems, ConfigProblem(
            shown, "must be a mapping with a `config:` block", "start the file with `config:` and indent the keys "
            "below it", value=f"a {type(document).__name__}")])
    errors = [ConfigProblem(shown, f"top-level key {json.dumps(key)} is not part of a stack file",
                            f"remove it or correct the spelling; {did_you_mean(key, list(STACK_FILE_KEYS))}")
              for key in document if key not in STACK_FILE_KEYS]
    if "environment" in document:
        errors.append(ConfigProblem(shown, "`environment` (Pulumi ESC) is not read by this project: the offline plan "
                                    "and its checks could not see those values", "set the values under `config:`"))
    config = document.get("config")
    if config is not None and not isinstance(config, Mapping):
        errors.append(ConfigProblem(shown, "`config` must be a mapping of keys to values",
                                    "indent the keys below `config:`", value=f"a {type(config).__name__}"))
    carried = refusals_in(config) if isinstance(config, Mapping) else []
    outside = any(all(problem is not inside for inside in carried) for problem in parsed.problems)
    if errors or outside:  # the schema is not judged: every problem of the file, as the reader words it
        raise ConfigError([*file_problems, *errors])
    return dict(config or {})


def _qualify(key: str, project: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def _place_refusals(values: dict[str, Any], project: str, source: str, *,
                    typed: bool) -> tuple[dict[str, Any], list[ConfigProblem]]:
    """`values` (a stack file's, keys as written) with each `Refused` replaced by a `refused_value`,
    and its problems as the report words them: named by the key the value stands at, the fix
    fitting the type that key takes (`typed`: this project's keys are in keys.py)."""
    placed: list[tuple[YamlProblem, ConfigProblem]] = []

    def place(value: Any, key: str) -> Any:
        if isinstance(value, Refused):
            # The first problem is the value's own; any others lie inside a repeated key's values.
            words = [_yaml_problem(problem, key, source, project, typed=typed and index == 0)
                     for index, problem in enumerate(value.problems)]
            placed.extend(zip(value.problems, words, strict=True))
            return refused_value(words)
        if isinstance(value, dict):
            return {name: place(item, f"{key}.{name}") for name, item in value.items()}
        if isinstance(value, list):
            return [place(item, f"{key}[{index}]") for index, item in enumerate(value)]
        return value

    result = {key: place(value, _qualify(key, project)) for key, value in values.items()}
    return result, [words for _, words in sorted(placed, key=lambda pair: (pair[0].line, pair[0].column))]


def _yaml_problem(problem: YamlProblem, key: str, source: str, project: str, *, typed: bool) -> ConfigProblem:
    expected = expected_type(key.removeprefix(f"{project}:")) if typed and key.startswith(f"{project}:") else None
    return ConfigProblem(key, problem.rule, problem.fix_for(expected),
                         where=f"{source}: line {problem.line}, column {problem.column}")


def _qualified(values: dict[str, Any], project: str, source: str, errors: list[ConfigProblem]) -> dict[str, Any]:
    """`values` with every key qualified by the project name, as the Pulumi CLI qualifies a stack
    file's keys (sdk/go/common/workspace/loaders.go, stackConfigNamespacedWithProject: a key
    without ':' becomes <project>:<key>). A key given in both spellings would reach the CLI twice
    and keep whichever its map iteration (random in Go) writes last: an error naming both."""
    result: dict[str, Any] = {}
    spelling: dict[str, str] = {}
    for key, value in values.items():
        full = _qualify(key, project)
        if full in spelling:
            errors.append(ConfigProblem(
                source, f"{full} is set twice, as {path_for_message(json.dumps(spelling[full]))} and "
                f"{path_for_message(json.dumps(key))} (a key without a namespace is {project}:<key>); which value the "
                "Pulumi CLI keeps is not defined", f"keep one, written as {full}"))
            continue
        spelling[full] = key
        result[full] = value
    return result


def _replace_secure(value: Any, key: str, secure: list[str], plain: list[str], errors: list[ConfigProblem]) -> Any:
    """Swap `secure:` ciphertexts (undecryptable without the stack's key) for placeholders; record
    the paths of the secure leaves and of the plain ones, and an error for a `secure:` that cannot
    be a ciphertext (`pulumi config set --secret` writes a non-empty base64 string)."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        ciphertext = value["secure"]
        if refused_problems(ciphertext):
            return ciphertext  # refused by the YAML reader, which says why: no ciphertext
        if not isinstance(ciphertext, str) or not ciphertext.strip():
            errors.append(ConfigProblem(
                key, "`secure:` must hold the ciphertext `pulumi config set --secret` writes, a non-empty string",
                f"set it again with `pulumi config set --secret{' --path' if '.' in key or '[' in key else ''} '{key}' "
                "<value>`", value=SECRET))
        secure.append(key)
        return f"offline-placeholder-for-{key}"
    if isinstance(value, dict):
        return {k: _replace_secure(v, f"{key}.{k}", secure, plain, errors) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_secure(v, f"{key}[{i}]", secure, plain, errors) for i, v in enumerate(value)]
    plain.append(key)
    return value


def _top_level_problem(value: Any, *, written: bool) -> tuple[str, str] | None:
    """(problem, fix) when a top-level value of the project would not reach the program as written,
    or None. Every top-level scalar of this project is text: the CLI passes it on as a string."""
    if value is None:
        return ('is empty (YAML null): the Pulumi CLI would pass the text "null"',
                "give it a value, or remove the key to use its default")
    if isinstance(value, bool | float):
        return (f"is the YAML {'boolean' if isinstance(value, bool) else 'decimal'} {json.dumps(value)}, which reaches "
                f"the program as the text {json.dumps(json.dumps(value))}, not as written (0.10 becomes \"0.1\", True "
                "becomes \"true\")", "quote the value as you mean it")
    if written and isinstance(value, str) and not value.strip():
        # Pulumi.yaml's `default: ""` means "not set"; written in a stack file, it is a mistake.
        return "is empty", "give it a value, or remove the key to use its default"
    return None


def _encode(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def stack_names(stack_dir: Path) -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stack_dir.glob("Pulumi.*.yaml"))


def missing_stack_fix(stack: str, stack_dir: Path = REPO_ROOT / "stacks", project_dir: Path = REPO_ROOT) -> str:
    """A close name of this project (`Prod`: 'prod'), or the other project holding the stack."""
    bootstrap = REPO_ROOT / "bootstrap"
    in_bootstrap = project_dir.resolve() == bootstrap
    if not in_bootstrap and (bootstrap / f"Pulumi.{stack}.yaml").is_file():
        return (f"'{stack}' is the bootstrap project's stack: pass --project bootstrap (`make plan` and `make cost` do "
                f"for STACK={stack})")
    if in_bootstrap and (REPO_ROOT / "stacks" / f"Pulumi.{stack}.yaml").is_file():
        return f"'{stack}' is a stack of the project at the repository root: leave out --project bootstrap"
    known = stack_names(stack_dir)
    by_lower = {name.lower(): name for name in known}
    close = difflib.get_close_matches(stack.lower(), list(by_lower), n=1, cutoff=0.6)
    if close:
        case = " (stack names are case-sensitive)" if close[0] == stack.lower() else ""
        return f"did you mean '{by_lower[close[0]]}'?{case}"
    create = "" if in_bootstrap else ", or create it (scripts/new-team-stack writes team stacks)"
    return f"use one of {', '.join(known) or '(none)'}{create}"


def stack_config(stack: str, stack_file: Path | None = None, *, overrides: dict[str, Any] | None = None,
                 secret_overrides: dict[str, Any] | None = None,
                 project_dir: Path = REPO_ROOT) -> tuple[str, dict[str, str], list[str]]:
    """(project, fully-qualified config as the engine passes it, secret keys).

    `project_dir` holds the Pulumi.yaml: the repository root, or bootstrap/ for the bootstrap."""
    if not STACK_NAME.fullmatch(stack):
        raise ConfigError([ConfigProblem(f"stack {path_for_message(repr(stack))}", "is not a Pulumi stack name (1 to 100 "
                                         "letters, digits, '-', '_' or '.')", "use dev, staging, prod or team-<team>-<env>")])
    project = project_file(project_dir)
    name = project["name"]
    path = stack_file or project_dir / project.get("stackConfigDir", ".") / f"Pulumi.{stack}.yaml"
    if stack_file is None and not path.is_file():
        raise ConfigError([ConfigProblem(f"stack '{stack}'", f"no stack file at {shown_path(path)}",
                                         missing_stack_fix(stack, path.parent, project_dir))])
    shown = shown_path(path)
    stack_values, refused = _place_refusals(read_stack_file(path), name, shown, typed=project_dir.resolve() == REPO_ROOT)

    errors: list[ConfigProblem] = []
    values: dict[str, Any] = {}
    # Project-level defaults apply first, as the CLI applies them (the SDK alone does not).
    for key, spec in (project.get("config") or {}).items():
        if isinstance(spec, dict) and ("default" in spec or "value" in spec):
            values[_qualify(key, name)] = spec.get("default", spec.get("value"))
        elif not isinstance(spec, dict):
            values[_qualify(key, name)] = spec
    file_values = _qualified(stack_values, name, shown, errors)
    values.update(file_values)
    set_values = _qualified(overrides or {}, name, "--set", errors)
    values.update(set_values)
    secret_values = _qualified(secret_overrides or {}, name, "--secret", errors)
    for flag, given in (("--set", set_values), ("--secret", secret_values)):
        for key in given:
            if key.startswith(f"{name}:") and any(mark in key for mark in ".["):
                top = key.split(".")[0].split("[")[0]
                errors.append(ConfigProblem(key, f"is a path; {flag} sets whole top-level keys (not `pulumi config "
                                            "set --path`)", f"pass the whole value of {top} as JSON, e.g. {flag} "
                                            f"'{top}={{...}}'", where=flag))
    for key, value in values.items():
        written = key in file_values or key in set_values  # not a default of Pulumi.yaml
        problem = _top_level_problem(value, written=written) if key.startswith(f"{name}:") else None
        if problem:
            errors.append(ConfigProblem(key, *problem, where="--set" if key in set_values else shown))
    config, secret_keys = {}, []
    for key, value in values.items():
        secure: list[str] = []
        plain: list[str] = []
        secure_errors: list[ConfigProblem] = []
        config[key] = _encode(_replace_secure(value, key, secure, plain, secure_errors))
        errors.extend(replace(error, where="--set" if key in set_values else shown) for error in secure_errors)
        # The engine marks a key secret as a whole; a plain leaf beside secure ones would pass
        # unnoticed (and be committed), so a mixed key names only its secure leaves.
        secret_keys.extend(([key] if not plain else secure) if secure else [])
    for key, value in secret_values.items():
        config[key] = _encode(value)
        secret_keys.append(key)
    # A refused value the program will not see (replaced by --set, or by the other spelling of its
    # key): the file's problems are reported here, with the others found so far.
    reaching = {problem for key, value in values.items() if key not in secret_values for problem in refused_in(value)}
    if errors or any(problem not in reaching for problem in refused):
        raise ConfigError([*refused, *errors])
    return name, config, secret_keys
