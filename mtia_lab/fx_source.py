"""Where an FX node came from in the user's code: one line, `file:line: code`.

Dynamo keeps each node's Python stack in `node.meta["stack_trace"]`. Both compile paths (our
scheduler in `compiler/`, real Inductor in `inductor/`) name a kernel's aten nodes by the user's
line that made them, so they share this reading of the stack (and nothing else).
"""

from __future__ import annotations

import torch

from .source_names import short_source


def user_frame(node: torch.fx.Node) -> str:
    """The innermost frame of the node's stack trace that is the user's code, not torch's; a
    model made only of torch.nn modules has no user frame, so torch's own line is named instead.
    "" when the node carries no stack trace."""
    lines = (node.meta.get("stack_trace") or "").strip().splitlines()
    best = innermost = ""
    for i, line in enumerate(lines):
        line = line.strip()
        if line.startswith("File ") and ", line " in line:
            parts = line.split(", ")
            where = short_source(parts[0][6:-1] + ":" + parts[1].removeprefix("line "))
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            innermost = f"{where}: {code}" if code else where
            if "/torch/" not in line:
                best = innermost
    return best or innermost
