"""The simulated clock held to a real chip: measurements from a GPU, re-priced by the cost model.

No MTIA is at hand, but a GPU is: benchmarks/gpu_calibration/gpu_side.py times eager ops and
the kernels Inductor generates on an NVIDIA H100 and H200, and stores what it measured as JSON
in `data/` (with the GPU, driver, torch and Triton versions). Here, without a GPU:

- `measurements.py` reads those files (`load("h100")`);
- `profiles.py` turns their measured peaks into `ChipProfile`s beside the MTIA ones (H100_SXM,
  H200), each figure with its source;
- `pricing.py` prices every measured kernel with the simulator's own cost model
  (backend/runtime/cost.py) on that profile and sets prediction against measurement (`compare`);
- `report.py` prints the comparison (`python -m mtia_lab.calibration`).

The pictures are in mtia_lab/viz/calibration.py; the data model here knows nothing of them.
"""

from .measurements import Measurements, load
from .pricing import Calibration, Row, compare
from .profiles import gpu_profile

__all__ = ["Calibration", "Measurements", "Row", "compare", "gpu_profile", "load"]
