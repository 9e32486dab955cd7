"""One rank of `mtia_lab.distributed.launch`: `python -m mtia_lab.distributed._worker payload
result`. The launcher set this process's variables (RANK, MTIA_SIM_VISIBLE_DEVICES, ...)."""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from datetime import timedelta


def main(payload_path: str, result_path: str) -> int:
    import torch.distributed as dist

    import mtia_lab  # a rank's entry point: set up as `import mtia_lab` sets up the user's process

    rank = int(os.environ["RANK"])
    trace = None
    try:
        with open(payload_path, "rb") as f:
            payload = pickle.load(f)  # imports the function's module
        # Rendezvous through a file in the launcher's temporary directory: no port to race for
        # (MASTER_ADDR/MASTER_PORT are set too, for code that reads them).
        dist.init_process_group(payload["backend"], init_method="file://" + payload["store"],
                                rank=rank, world_size=int(os.environ["WORLD_SIZE"]),
                                timeout=timedelta(seconds=payload["timeout"]))
        if payload["trace"]:
            with mtia_lab.trace(f"rank {rank}") as trace:
                value = payload["fn"](*payload["args"], **payload["kwargs"])
        else:
            value = payload["fn"](*payload["args"], **payload["kwargs"])
        result = {"status": "ok", "value": value, "trace": trace}
        try:
            data = pickle.dumps(result)
        except Exception as error:
            raise TypeError(f"rank {rank}'s return value cannot be sent back to the launcher "
                            f"({error}); return plain values or CPU tensors") from error
    except BaseException as error:  # noqa: BLE001  (reported to the launcher, then exit)
        data = pickle.dumps({"status": "error", "type": type(error).__name__,
                             "message": str(error), "traceback": traceback.format_exc()})
        _write(result_path, data)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # at once: peers' collectives see the closed connection and fail fast
    _write(result_path, data)
    dist.destroy_process_group()
    return 0


def _write(path: str, data: bytes) -> None:
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
