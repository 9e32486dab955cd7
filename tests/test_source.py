"""One rule for "the user's line" (mtia_lab/source.py): allocations, trace events and FX nodes
name the same frame, the first one that is neither torch, nor the standard library, nor
mtia_lab."""

from __future__ import annotations

import copy
import inspect
import os
from types import SimpleNamespace

import torch

import mtia_lab
from mtia_lab.source import is_user_file, node_source, user_source

HERE = os.path.abspath(__file__)


def _line(marker: str) -> int:
    """The line of this file that holds `marker` (in a comment)."""
    lines = inspect.getsource(inspect.getmodule(_line)).splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text and "_line(" not in text)


def test_the_live_stack_names_the_callers_line():
    where = user_source()  # the caller
    assert where == f"{HERE}:{_line('# the caller')}"
    assert is_user_file(HERE) and not is_user_file(torch.__file__)
    assert not is_user_file(copy.__file__) and not is_user_file(mtia_lab.__file__)
    assert is_user_file(mtia_lab.__file__, package_is_user=True)


def _live_blocks() -> dict[int, str]:
    """address -> source of every allocated block of device 0."""
    return {b["address"]: b["source"] for seg in torch.mtia_sim.memory_snapshot(0)
            for b in seg["blocks"] if b["state"] == "active_allocated"}


def test_memory_made_inside_the_standard_library_is_the_users_line():
    x = torch.ones(256, device="mtia_sim")
    before = _live_blocks()
    y = copy.deepcopy(x)  # deepcopy here
    new = {source for address, source in _live_blocks().items() if address not in before}
    assert new == {f"{HERE}:{_line('# deepcopy here')}"}  # not copy.py's line
    del y


def test_trace_events_and_allocations_name_the_same_line():
    before = _live_blocks()
    with mtia_lab.trace() as t:
        z = torch.zeros(64, device="mtia_sim")  # both name this
    line = f"{HERE}:{_line('# both name this')}"
    assert t.events and {e.source for e in t.events} == {line}
    assert {source for address, source in _live_blocks().items() if address not in before} == {
        line}
    del z


def test_an_fx_nodes_source_is_its_innermost_frame_outside_torch():
    package_file = os.path.join(os.path.dirname(mtia_lab.__file__), "tour.py")
    stack = (f'  File "{HERE}", line 7, in step\n    y = model(x)\n'
             f'  File "{package_file}", line 30, in forward\n    return self.fc(x).relu()\n'
             f'  File "{torch.__file__}", line 9, in _call_impl\n    return forward(*args)\n')
    # a demo model defined in mtia_lab counts as the user's (package_is_user=True)
    assert node_source(SimpleNamespace(meta={"stack_trace": stack})) == (
        "tour.py:30: return self.fc(x).relu()")
    only_torch = stack.split(f'  File "{torch.__file__}"')[1]
    assert node_source(SimpleNamespace(meta={"stack_trace": f'  File "{torch.__file__}"'
                                              + only_torch})) == (
        "__init__.py:9: return forward(*args)")
    assert node_source(SimpleNamespace(meta={})) == ""
