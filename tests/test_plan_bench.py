"""Smoke runs of the plan benchmark's parts (what `make bench` runs at full size). They assert no
speed: speed goals are read from `make bench`."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import doc_block, harness
from offline.generated_files import RenderError

ROOT = Path(__file__).resolve().parent.parent


def _profile_module():
    spec = importlib.util.spec_from_file_location("plan_profile", ROOT / "bench" / "plan_profile.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("filename", "label"), [
    (f"{ROOT}/components/network/vpc.py", "the program"),
    (f"{ROOT}/__main__.py", "the program"),
    (f"{ROOT}/offline/plan.py", "the plan's harness"),
    ("/x/.venv/lib/python3.11/site-packages/pulumi/runtime/rpc.py", "Pulumi SDK"),
    ("/x/.venv/lib/python3.11/site-packages/pulumi_aws/ec2/vpc.py", "provider SDKs"),
    ("/usr/lib/python3.11/asyncio/base_events.py", "asyncio"),
    ("/usr/lib/python3.11/typing.py", "typing"),
    ("/x/.venv/lib/python3.11/site-packages/google/protobuf/json_format.py", "other libraries"),
    ("/usr/lib/python3.11/pathlib.py", "the rest of the standard library"),
])
def test_profile_places_code_by_where_it_lives(filename, label):
    assert _profile_module().place(filename).startswith(label)


def test_profile_shares_add_up():
    run = subprocess.run([sys.executable, "-m", "bench.plan_profile", "--stack", "team-vision-prod"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    shares = {line.split("%", 1)[1].strip(): float(line.split("%", 1)[0])
              for line in run.stdout.splitlines()[1:]}
    assert "the program: components/, __main__.py" in shares
    assert sum(shares.values()) == pytest.approx(100, abs=0.5)


@pytest.mark.parametrize("typed", [[], ["--typed", "pulumi_aws.ec2.SecurityGroup"]])
def test_floor_runs_with_a_list_of_imports(tmp_path, typed):
    modules = tmp_path / "modules.txt"
    modules.write_text("pulumi_aws.s3\n")
    run = subprocess.run([sys.executable, "-m", "bench.plan_floor", "3", "--imports", str(modules), *typed],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert not re.search(r"Traceback|Error", run.stderr)


@pytest.mark.parametrize("arguments", [
    ["--typed"],
    ["--typed", "nosuch.Thing"],
    ["--typed", "pulumi_aws.ec2.Nope"],
    ["--typed", "pulumi_aws.ec2.SecurityGroupArgs"],
    ["--imports", "/nonexistent/modules.txt"],
])
def test_floor_refuses_bad_arguments_without_a_traceback(arguments):
    run = subprocess.run([sys.executable, "-m", "bench.plan_floor", "3", *arguments],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 2
    assert arguments[0] in run.stderr or "No such file" in run.stderr or "module" in run.stderr
    assert "Traceback" not in run.stderr


# --- the harness every goal is measured with (bench/harness.py) -----------------------------------



@pytest.mark.parametrize(("pair", "sides", "order"), [
    (0, 2, [0, 1]), (1, 2, [1, 0]), (2, 2, [0, 1]), (3, 2, [1, 0]), (1, 3, [1, 2, 0]), (5, 3, [2, 0, 1]),
])
def test_rotation_puts_every_side_first_in_turn(pair, sides, order):
    assert harness.rotation(pair, sides) == order


@pytest.mark.parametrize(("top", "bottom", "medians", "minimums", "paired"), [
    ([2.0, 4.0, 6.0], [1.0, 2.0, 3.0], 2.0, 2.0, [2.0, 2.0, 2.0]),
    # A slow moment that hits both sides of a pair cancels out of its paired ratio, not out of the medians.
    ([1.0, 10.0, 1.2], [1.0, 10.0, 1.0], 1.2, 1.0, [1.0, 1.0, 1.2]),
    ([3.0], [0.0], float("inf"), float("inf"), [float("inf")]),
])
def test_ratio_statistics(top, bottom, medians, minimums, paired):
    assert harness.ratio_of_medians(top, bottom) == pytest.approx(medians)
    assert harness.ratio_of_minimums(top, bottom) == pytest.approx(minimums)
    assert harness.paired_ratios(top, bottom) == pytest.approx(paired)


def test_paired_ratios_refuse_unpaired_values():
    with pytest.raises(ValueError, match="not pairs"):
        harness.paired_ratios([1.0, 2.0], [1.0])


@pytest.mark.parametrize(("value", "op", "threshold", "met"), [
    (1.19, "<=", 1.2, True), (1.2, "<=", 1.2, True), (1.21, "<=", 1.2, False),
    (0.81, ">=", 0.8, True), (0.8, ">=", 0.8, True), (0.79, ">=", 0.8, False),
])
def test_meets(value, op, threshold, met):
    assert harness.meets(value, op, threshold) is met


def _result(goal, project, floor):
    return harness.Result("x", "project", "floor", goal, [harness.Sample(w, c) for w, c in project],
                          [harness.Sample(w, c) for w, c in floor], warmup=1)


@pytest.mark.parametrize(("goal", "project", "floor", "verdict", "paired_median"), [
    # "<=": project / floor, judged by CPU even when wall time says otherwise.
    (harness.Goal("<=", 1.2, "cpu"), [(3.0, 1.1), (3.0, 1.1), (3.0, 1.3)], [(1.0, 1.0)] * 3, "met", 1.1),
    (harness.Goal("<=", 1.2, "wall"), [(3.0, 1.1), (3.0, 1.1), (3.0, 1.3)], [(1.0, 1.0)] * 3, "not met", 3.0),
    # ">=": floor / project, the project's speed over the floor's.
    (harness.Goal(">=", 0.8), [(1.0, None), (1.25, None)], [(0.9, None), (1.0, None)], "met", 0.85),
    (harness.Goal(">=", 0.9), [(1.0, None), (1.25, None)], [(0.9, None), (1.0, None)], "not met", 0.85),
    (harness.Goal("<=", 1.2, "cpu"), [(1.0, None)], [(1.0, None)], "not measured", None),
    (None, [(1.0, None)], [(1.0, None)], None, 1.0),
])
def test_verdicts_come_from_the_paired_ratio_of_the_goals_measure(goal, project, floor, verdict, paired_median):
    result = _result(goal, project, floor)
    assert result.verdict == verdict
    if paired_median is not None:
        ratios = result.ratios(goal.by if goal else "wall")
        assert ratios is not None and ratios["paired_median"] == pytest.approx(paired_median)
    assert result.as_json()["verdict"] == verdict


def test_run_pairs_rotates_discards_the_warm_up_and_runs_before_ahead_of_every_run():
    log: list[str] = []

    def side(name, seconds):
        def run():
            log.append(name)
            return harness.Sample(seconds)
        return run

    result = harness.run_pairs("x", ("project", side("p", 2.0)), ("floor", side("f", 1.0)), pairs=3, warmup=1,
                               goal=harness.Goal("<=", 2.0), before=lambda: log.append("-"))
    assert log == ["-", "p", "-", "f", "-", "f", "-", "p", "-", "p", "-", "f", "-", "f", "-", "p"]
    assert len(result.project_samples) == len(result.floor_samples) == 3 and result.warmup == 1
    assert result.verdict == "met"


def test_a_whole_process_figure_has_cpu_time_beside_wall_time():
    burn = "import time\nwhile time.process_time() < 0.2: pass"
    sample = harness.timed_process([sys.executable, "-c", burn])
    assert sample.cpu is not None and sample.cpu >= 0.2, "the child's own CPU time"
    assert sample.wall >= sample.cpu * 0.95  # one thread: no more CPU than wall time


def test_report_sections_share_one_json_file(tmp_path, capsys):
    path = tmp_path / "latest.json"
    for section in ("plan", "trainer"):
        report = harness.Report(section)
        report.results.append(_result(harness.Goal("<=", 1.2), [(1.0, None)], [(1.0, None)]))
        report.save(path)
    saved = json.loads(path.read_text())
    assert sorted(saved) == ["plan", "trainer"]
    assert saved["plan"]["results"][0]["verdict"] == "met" and len(saved["plan"]["load_average"]["before"]) == 3
    assert "1 of 1 goals met" in capsys.readouterr().out


# --- docs/testing.md shows the committed figures --------------------------------------------------


def test_the_docs_show_the_committed_bench_figures():
    assert doc_block.main(["--check"]) == 0, "docs/testing.md differs from docs/bench/latest.json"


def test_the_figures_block_follows_the_json(tmp_path):
    figures = json.loads(doc_block.FIGURES.read_text())
    section = figures["trainer"]
    section["results"][0]["verdict"] = "a verdict the JSON says"
    changed = tmp_path / "latest.json"
    changed.write_text(json.dumps({"trainer": section}))
    text = doc_block.PAGE.read_text()
    rendered = doc_block.render_page(text, changed)
    assert "**a verdict the JSON says**" in rendered and rendered != text
    with pytest.raises(RenderError, match="no `<!-- bench figures"):
        doc_block.render_page("no block here\n", changed)


def test_replay_floor_registers_the_plans_own_resources_with_their_inputs(plan_of):
    """The typed floor with real inputs (bench/plan_floor.py --replay) is the plan's resources,
    the same types, names, parents and inputs, registered again through the provider SDKs."""
    import pulumi

    from bench.plan_floor import replayer

    records = plan_of("prod").resources
    seen: dict[tuple[str, str], dict] = {}

    class Recorder(pulumi.runtime.Mocks):
        def new_resource(self, args):
            seen[(args.typ, args.name)] = args.inputs
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args):
            return {}, []

    # A fresh runtime, as bench/plan_floor.py has: no stack transformation an earlier plan of this
    # process registered (offline/plan.py resets the same way).
    pulumi.runtime.reset_options(project="bench", stack="floor")
    pulumi.runtime.set_mocks(Recorder(), project="bench", stack="floor", preview=False)
    replay = replayer(records)
    pulumi.runtime.test(lambda: pulumi.Output.all(*[resource.urn for resource in replay()]))()
    custom = {(r["type"], r["name"]): r["inputs"] for r in records if r["custom"]}
    assert len(custom) > 300

    def unwrapped(value):  # a secret as the mock monitor hands it over; the plan records it redacted
        if isinstance(value, dict):
            if pulumi.runtime.rpc._special_sig_key in value:
                return value["value"]
            return {k: unwrapped(v) for k, v in value.items()}
        return [unwrapped(v) for v in value] if isinstance(value, list) else value

    assert {key: unwrapped(seen.get(key)) for key in custom} == custom
