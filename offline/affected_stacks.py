"""Which stacks a change can affect: the files each stack's offline plan reads.

A stack's plan (offline/plan.py under the mock runtime) reads:
- its own stack file (stacks/Pulumi.<stack>.yaml; bootstrap/Pulumi.<stack>.yaml for the bootstrap);
- a team stack (team-<team>-<env>) also its platform stack `<env>`'s plan, so everything that
  one reads (components/config/stack.py stack_kind: the platform is named by the stack name),
  and where that platform is a MultiKueue manager, its workers' plans (the team's tenancy there,
  offline/plan.py referenced_stack_outputs): the environment's further-region stacks
  `<env>-<site>`, all of them (which ones are workers is the manager's config: replanning the
  team for a region that is none costs time, never a wrong diff);
- a platform stack also the other environments' stack files, for their network.vpcCidr only
  (components/config/sibling_stacks.py): a change elsewhere in those files leaves it alone;
- a further region's stack `<env>-<site>` also its environment's stack file `<env>` whole: a
  MultiKueue worker reads its fellow workers from its manager's multiKueue.workers (which stack is
  the manager is that file's config: replanning a site that is no worker costs time, never a
  wrong diff);
- the hyperparameters files its jobs name (components/config/training.py: any file of the
  repository; trainer/example_trainer/hparams.yaml by default);
- the code: components/, offline/, scripts/plan.py, schemas/ (CRDs read as files), the project
  files (Pulumi.yaml), requirements*.txt (what the environment holds), __main__.py for the main
  project and bootstrap/ for the bootstrap.
Paths known to be read by no plan (docs, tests, CI, the trainer's code, the diff tool itself)
affect nothing; any other path replans every stack, so an input added later without a rule here
costs time, never a wrong diff.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from components.config.stack_names import stack_kind

BOOTSTRAP_DIR = "bootstrap"
MAIN_STACK_DIR = "stacks"  # Pulumi.yaml's stackConfigDir
# A bootstrap stack's label in plan-diff: bootstrap/<stack>.
BOOTSTRAP_PREFIX = f"{BOOTSTRAP_DIR}/"

# Scopes of a path that is not a stack file.
EVERY_STACK, MAIN_PROJECT, BOOTSTRAP_PROJECT, NO_STACK = "every stack", "main project", "bootstrap", "none"

# (glob on the repository-relative path, scope, what the file is). First match wins: the diff
# tool's own modules before offline/, scripts/plan.py before scripts/.
PATH_RULES: tuple[tuple[str, str, str], ...] = (
    ("offline/plan_diff.py", NO_STACK, "the diff tool (runs from this checkout, plans nothing)"),
    ("offline/affected_stacks.py", NO_STACK, "the diff tool (runs from this checkout, plans nothing)"),
    ("components/*", EVERY_STACK, "program code (the bootstrap imports components/ too)"),
    ("offline/*", EVERY_STACK, "the offline planner"),
    ("scripts/plan.py", EVERY_STACK, "the offline planner"),
    ("schemas/*", EVERY_STACK, "schemas the program reads"),
    ("Pulumi.yaml", EVERY_STACK, "the main project file"),
    ("requirements*.txt", EVERY_STACK, "the program's dependencies"),
    ("requirements.lock", EVERY_STACK, "the program's dependencies, hashed, as the deploy jobs install them"),
    ("__main__.py", MAIN_PROJECT, "the main program"),
    (f"{BOOTSTRAP_DIR}/*", BOOTSTRAP_PROJECT, "the bootstrap program"),
    ("docs/*", NO_STACK, "documentation"),
    ("tests/*", NO_STACK, "tests"),
    (".github/*", NO_STACK, "CI"),
    (".ci/*", NO_STACK, "CI"),
    ("bench/*", NO_STACK, "benchmarks"),
    ("trainer/*", NO_STACK, "the trainer image's code"),
    ("verify/*", NO_STACK, "the go-live checks"),
    ("job_command/*", NO_STACK, "the job command (judges and renders with the checkout's code; plans no stack)"),
    ("policy/*", NO_STACK, "the policy pack (pulumi preview runs it, not the plan)"),
    ("scripts/*", NO_STACK, "commands other than the planner"),
    ("*.md", NO_STACK, "documentation"),
    ("Makefile", NO_STACK, "build commands"),
    ("pyproject.toml", NO_STACK, "tool settings"),
    (".gitignore", NO_STACK, "git settings"),
)


def path_scope(path: str) -> tuple[str, str]:
    """(scope, what the file is) of a path that is not a stack file; unknown paths reach every stack."""
    for pattern, scope, what in PATH_RULES:
        if fnmatch.fnmatchcase(path, pattern):
            return scope, what
    return EVERY_STACK, "a file no rule of offline/affected_stacks.py knows (so every stack is replanned)"


def stack_file(label: str) -> str:
    """The stack file of a plan-diff stack label (`dev`, `bootstrap/bootstrap`)."""
    if label.startswith(BOOTSTRAP_PREFIX):
        return f"{BOOTSTRAP_DIR}/Pulumi.{label.removeprefix(BOOTSTRAP_PREFIX)}.yaml"
    return f"{MAIN_STACK_DIR}/Pulumi.{label}.yaml"


def platform_of(label: str) -> str | None:
    """The platform stack a team stack reads (team-vision-prod -> prod); None for any other stack."""
    if label.startswith(BOOTSTRAP_PREFIX):
        return None
    team, environment = stack_kind(label)
    return environment if team else None


def platforms_read_by(label: str, labels: Iterable[str]) -> list[str]:
    """Every platform stack of `labels` whose plan a team stack reads: its platform's, then its
    environment's further regions' (the manager's workers among them); [] for any other stack."""
    environment = platform_of(label)
    if environment is None:
        return []
    regional = sorted(other for other in labels if other != environment and _is_platform(other)
                      and stack_kind(other)[1] == environment)
    return [environment, *regional]


@dataclass(frozen=True)
class ChangeFacts:
    """What the pure selection needs beyond the paths, read from the two trees by plan_diff."""

    hyperparameter_files: frozenset[str] = frozenset()
    """Every hyperparameters file a stack file names at either ref, and the default one."""
    vpc_cidr_changed: frozenset[str] = frozenset()
    """Environments whose stack file's network.vpcCidr, as the other platform stacks read it, differs."""


def _in_scope(label: str, scope: str) -> bool:
    if scope in (EVERY_STACK, NO_STACK):
        return scope == EVERY_STACK
    return (scope == BOOTSTRAP_PROJECT) == label.startswith(BOOTSTRAP_PREFIX)


def _is_platform(label: str) -> bool:
    """A platform stack of the main project: an environment's, or one of its further regions'."""
    team, environment = stack_kind(label)
    return team is None and environment is not None


def _direct_reasons(path: str, labels: list[str], facts: ChangeFacts) -> dict[str, str]:
    """Stack label -> why `path` changes its plan, before a team follows its platform."""
    files = {stack_file(label): label for label in labels}
    if posixpath.normpath(path) in facts.hyperparameter_files:
        return {label: f"`{path}` (a hyperparameters file jobs read) changed"
                for label in labels if not label.startswith(BOOTSTRAP_PREFIX)}
    if path in files or fnmatch.fnmatchcase(path, f"{MAIN_STACK_DIR}/Pulumi.*.yaml"):
        reasons = {files[path]: f"`{path}` (its stack file) changed"} if path in files else {}
        environment = path.removeprefix(f"{MAIN_STACK_DIR}/Pulumi.").removesuffix(".yaml")
        if environment in facts.vpc_cidr_changed:
            reasons |= {label: f"`{path}`'s network.vpcCidr (which every platform stack checks its own against) changed"
                        for label in labels if _is_platform(label) and label not in reasons}
        reasons |= {label: f"`{path}` (its environment's stack file, whose multiKueue.workers a worker reads) changed"
                    for label in labels if _is_platform(label) and label != environment
                    and stack_kind(label)[1] == environment and label not in reasons}
        reasons |= {label: f"`{path}` (its platform's stack file) changed"
                    for label in labels if platform_of(label) == environment and label not in reasons}
        return reasons
    scope, what = path_scope(path)
    return {label: f"`{path}` ({what}) changed" for label in labels if _in_scope(label, scope)}


def affected_stacks(changed_paths: Iterable[str], labels: Collection[str],
                    facts: ChangeFacts = ChangeFacts()) -> dict[str, list[str]]:
    """Stack label -> why it must be replanned, for every stack of `labels` whose plan the change to
    `changed_paths` (repository-relative, both sides of a rename) can alter. The others' head plan is
    their base plan. A team stack follows its platform: it plans the platform's stack in-process."""
    ordered = sorted(labels)
    reasons: dict[str, list[str]] = {}
    for path in sorted(set(changed_paths)):
        for label, why in _direct_reasons(path, ordered, facts).items():
            reasons.setdefault(label, []).append(why)
    for label in ordered:
        replanned = [platform for platform in platforms_read_by(label, ordered) if platform in reasons]
        if replanned and label not in reasons:
            reasons[label] = [f"its platform stack `{platform}`, whose plan it reads, is replanned"
                              if platform == platform_of(label) else
                              f"its environment's stack `{platform}` (a MultiKueue worker's plan it reads) is replanned"
                              for platform in replanned]
    return {label: reasons[label] for label in ordered if label in reasons}
