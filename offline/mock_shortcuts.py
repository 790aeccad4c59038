"""Work of the Pulumi SDK that only a real engine reads, skipped under the mock engine.

Shared by offline/plan.py and bench/plan_floor.py: the floor the plan is measured against
skips the same work, so the ratio between them stays the program's own cost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pulumi.runtime import resource as resource_runtime
from pulumi.runtime.proto import source_pb2

# The SDK function that a registration calls to walk the Python stack (pulumi 3.272.0,
# sdk/python/lib/pulumi/runtime/resource.py). tests/test_plan_records.py fails when an SDK
# upgrade renames it or stops calling it through the module, so that this shortcut is not silently lost.
STACK_TRACE_FUNCTION = "_get_stack_trace"


@contextlib.contextmanager
def no_source_positions() -> Iterator[None]:
    """Skip the stack walk behind every resource registration while the block runs.

    The SDK walks the whole Python stack for each resource (traceback.extract_stack: a stat per
    source file, a file URI per frame) to send the engine the resource's source position, which
    the engine shows in its diagnostics. The mock monitor never reads it; in a program built of
    components the walk was a quarter of a prod plan's synthesis. Nothing the plan writes
    depends on it. Where the SDK has no such function, nothing is skipped."""
    original = getattr(resource_runtime, STACK_TRACE_FUNCTION, None)
    if original is None:
        yield
        return
    setattr(resource_runtime, STACK_TRACE_FUNCTION, source_pb2.StackTrace)  # an empty trace, as for a top-level call
    try:
        yield
    finally:
        setattr(resource_runtime, STACK_TRACE_FUNCTION, original)
