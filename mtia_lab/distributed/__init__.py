"""Several simulated chips under torch.distributed: launcher, mtia_ccl, traces across ranks.

    from mtia_lab import distributed
    result = distributed.launch(step, nprocs=2, trace=True)   # `step` lives in a module
    result.trace                                               # all ranks, one trace

- spawn.py: `launch()`, N fresh processes, rank r owning simulated chip r as its mtia_sim:0;
- process_group.py (the API), collective_steps.py (what each device collective does),
  agreement.py, functional.py, registration.py: the `mtia_ccl` backend;
- interconnect.py: what a collective costs on the simulated clock (docs/interconnect.md);
- events.py, traces.py: collectives in each rank's trace, and the ranks' traces merged;
- local_map.py: a function on local shards with declared placements, checked.
"""

from __future__ import annotations

from .agreement import CollectiveError, CollectiveMismatchError
from .interconnect import CommCost, collective_cost
from .local_map import PlacementMismatchError, local_map
from .registration import register
from .spawn import LaunchError, LaunchResult, RankOutcome, launch
from .traces import (
    Collective,
    RankedEvent,
    RankedTrace,
    load_ranked_trace,
    merge_traces,
    save_chrome_trace,
    save_ranked_trace,
    to_chrome_trace,
)

__all__ = ["Collective", "CollectiveError", "CollectiveMismatchError", "CommCost",
           "LaunchError", "LaunchResult", "PlacementMismatchError", "RankOutcome",
           "RankedEvent", "RankedTrace", "collective_cost", "launch", "load_ranked_trace",
           "local_map", "merge_traces", "register", "save_chrome_trace", "save_ranked_trace",
           "to_chrome_trace"]
