"""Start N ranks on this machine, each a fresh Python process that owns one simulated chip.

    result = mtia_lab.distributed.launch(step, nprocs=2, args=(8,), trace=True)
    result.values          # what `step` returned on each rank, by rank
    result.trace           # every rank's trace in one (see traces.py)

    python -m mtia_lab.distributed --nproc 4 train.py --lr 0.1     (torchrun-style variables)

Each rank is a new interpreter (`python -m mtia_lab.distributed._worker`), never a fork: a
forked Jupyter kernel or torch runtime is not safe to use, and a fresh process can be given its
own chip before torch starts. Rank r gets `MTIA_SIM_VISIBLE_DEVICES=r`, so simulated chip r is
its `mtia_sim:0` (backward works only on index 0 on torch 2.13, see the README's known limits),
and torchrun's variables: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT. The function is sent by reference (module and name), so it must live in a module
the ranks can import: one the package ships, or one the notebook wrote (`%%writefile`).

Failures: when a rank raises or dies, its peers' pending collectives fail at once (gloo sees
the closed connection; mtia_ccl says so), a rank stuck outside collectives makes its peers time
out after `timeout` seconds, and the launcher stops every rank still running `grace` seconds
after the first failure. `LaunchError` then names the rank that failed first and why, with each
rank's outcome. No rank outlives `launch` (each runs in its own session, killed as a group).
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

DEFAULT_BACKEND = "cpu:gloo,mtia_sim:mtia_ccl"
POLL_S = 0.02


@dataclass
class RankOutcome:
    """How one rank ended: "ok", "raised" (a Python exception), "died" (no result: killed by a
    signal or os._exit) or "stopped" (killed by the launcher after another rank failed)."""

    rank: int
    status: str
    exit_code: int | None
    error_type: str = ""
    message: str = ""
    traceback: str = ""
    stderr_tail: str = ""
    ended_s: float = 0.0  # seconds after launch

    def describe(self) -> str:
        if self.status == "raised":
            return f"rank {self.rank}: {self.error_type}: {self.message}"
        if self.status == "died":
            how = (f"killed by signal {signal.Signals(-self.exit_code).name}"
                   if self.exit_code is not None and self.exit_code < 0
                   else f"exited with code {self.exit_code}")
            return f"rank {self.rank}: died ({how}) without a Python error"
        if self.status == "stopped":
            return (f"rank {self.rank}: still running after the others failed; stopped by the "
                    "launcher")
        return f"rank {self.rank}: ok"


class LaunchError(RuntimeError):
    """One or more ranks failed. `rank` is the one that failed first (the likely cause), and
    `outcomes` says how every rank ended."""

    def __init__(self, outcomes: list[RankOutcome], world: int) -> None:
        self.outcomes = outcomes
        culprit = _culprit(outcomes)
        self.rank = culprit.rank
        lines = [f"rank {culprit.rank} of {world} failed first: "
                 + culprit.describe().split(": ", 1)[1]]
        lines += ["every rank:"] + ["  " + o.describe().splitlines()[0] for o in outcomes]
        if culprit.traceback:
            lines += [f"rank {culprit.rank}'s traceback:", _indent(culprit.traceback)]
        elif culprit.stderr_tail:
            lines += [f"rank {culprit.rank}'s last stderr lines:", _indent(culprit.stderr_tail)]
        super().__init__("\n".join(lines))


@dataclass
class LaunchResult:
    """What the ranks returned, by rank; their traces when launched with trace=True."""

    values: list
    traces: list | None = None
    outputs: list[str] = field(default_factory=list)  # each rank's stdout

    @property
    def trace(self):
        """All ranks' traces merged into one (traces.merge_traces), or None."""
        if self.traces is None:
            return None
        from .traces import merge_traces

        return merge_traces(self.traces)


def launch(fn, nprocs: int = 2, args: tuple = (), kwargs: dict | None = None, *,
           timeout: float = 60.0, grace: float = 5.0, trace: bool = False,
           backend: str = DEFAULT_BACKEND, echo: bool = True) -> LaunchResult:
    """Run `fn(*args, **kwargs)` on `nprocs` ranks, with the process group initialised
    (`backend`, collectives time out after `timeout` s). Returns a LaunchResult; raises
    LaunchError naming the failed rank. `echo` prints each rank's stdout, prefixed, by rank."""
    _check_function(fn)
    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    with tempfile.TemporaryDirectory(prefix="mtia_lab_launch_") as tmp:
        payload = os.path.join(tmp, "payload.pkl")
        with open(payload, "wb") as f:
            pickle.dump({"fn": fn, "args": tuple(args), "kwargs": dict(kwargs or {}),
                         "timeout": timeout, "trace": trace, "backend": backend,
                         "store": os.path.join(tmp, "rendezvous")}, f)
        commands = [[sys.executable, "-m", "mtia_lab.distributed._worker", payload,
                     os.path.join(tmp, f"result{r}.pkl")] for r in range(nprocs)]
        codes, ended, logs = _run(commands, nprocs, tmp, grace, capture=True)
        outcomes, values, traces, outputs = [], [], [], []
        for rank in range(nprocs):
            out, err = (_read(logs[rank][0]), _read(logs[rank][1]))
            outputs.append(out)
            result = _load(os.path.join(tmp, f"result{rank}.pkl"))
            outcomes.append(_outcome(rank, codes[rank], ended[rank], result, err))
            values.append(result.get("value") if result else None)
            traces.append(result.get("trace") if result else None)
    if echo:
        for rank, out in enumerate(outputs):
            for line in out.splitlines():
                print(f"[rank {rank}] {line}")
    if any(o.status != "ok" for o in outcomes):
        raise LaunchError(outcomes, nprocs)
    return LaunchResult(values, traces if trace else None, outputs)


def run_command(argv: list[str], nprocs: int, grace: float = 5.0) -> int:
    """`python -m mtia_lab.distributed --nproc N script.py args`: run the script on N ranks
    (output passes through); returns the exit status, reporting failed ranks on stderr."""
    commands = [[sys.executable, *argv] for _ in range(nprocs)]
    with tempfile.TemporaryDirectory(prefix="mtia_lab_launch_") as tmp:
        codes, ended, _ = _run(commands, nprocs, tmp, grace, capture=False)
    outcomes = [_outcome(r, codes[r], ended[r], None, "") for r in range(nprocs)]
    failed = [o for o in outcomes if o.status != "ok"]
    if not failed:
        return 0
    culprit = _culprit(outcomes)
    print(f"mtia_lab.distributed: rank {culprit.rank} of {nprocs} failed first "
          f"(exit code {culprit.exit_code}; its traceback, if any, is above)", file=sys.stderr)
    for o in outcomes:
        state = {"ok": "ok", "stopped": "stopped by the launcher"}.get(
            o.status, f"exit code {o.exit_code}")
        print(f"  rank {o.rank}: {state}", file=sys.stderr)
    return 1


# -- the process side ---------------------------------------------------------------------------
def rank_environment(rank: int, world: int, port: int) -> dict[str, str]:
    """torchrun's variables for one rank, its simulated chip, and this process's import path
    (so the ranks import the same mtia_lab and the notebook's own modules)."""
    env = dict(os.environ)
    path = [os.getcwd() if p == "" else p for p in sys.path]
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port), "MTIA_SIM_VISIBLE_DEVICES": str(rank),
        "MTIA_SIM_LAUNCHED_RANK": "1",  # its chip is chosen for it (runtime/device_state.py)
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(p for p in path if p)),
    })
    # N ranks share this machine's cores: one thread each, unless told otherwise.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(commands, nprocs: int, tmp: str, grace: float, capture: bool):
    """Start every rank, wait for all; after the first failure, give the others `grace`
    seconds, then stop them. Returns exit codes, end times and log files."""
    port = _free_port()
    procs, logs = [], []
    start = time.monotonic()
    codes: list[int | None] = [None] * nprocs
    ended = [0.0] * nprocs
    stopped: set[int] = set()
    try:
        for rank, command in enumerate(commands):
            if capture:
                out = open(os.path.join(tmp, f"out{rank}.txt"), "wb")  # noqa: SIM115
                err = open(os.path.join(tmp, f"err{rank}.txt"), "wb")  # noqa: SIM115
                logs.append((out.name, err.name))
            else:
                out = err = None
            procs.append(subprocess.Popen(
                command, env=rank_environment(rank, nprocs, port), stdout=out, stderr=err,
                stdin=subprocess.DEVNULL, start_new_session=True))
            if capture:
                out.close()
                err.close()
        first_failure = None
        while any(c is None for c in codes):
            for rank, proc in enumerate(procs):
                if codes[rank] is None and proc.poll() is not None:
                    codes[rank] = proc.returncode
                    ended[rank] = time.monotonic() - start
                    if proc.returncode != 0 and first_failure is None:
                        first_failure = time.monotonic()
            if first_failure is not None and time.monotonic() - first_failure > grace:
                for rank, proc in enumerate(procs):
                    if codes[rank] is None:
                        _kill(proc)
                        stopped.add(rank)
            time.sleep(POLL_S)
    finally:  # KeyboardInterrupt or any error here: leave no rank behind
        for proc in procs:
            if proc.poll() is None:
                _kill(proc)
    for rank in stopped:
        codes[rank] = _STOPPED
    return codes, ended, logs


_STOPPED = -1000  # exit code marker: the launcher stopped this rank


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the rank and anything it started
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _outcome(rank, code, ended, result, stderr: str) -> RankOutcome:
    tail = "\n".join(stderr.strip().splitlines()[-15:])
    if code == _STOPPED:
        return RankOutcome(rank, "stopped", None, ended_s=ended, stderr_tail=tail)
    if result is not None and result.get("status") == "error":
        return RankOutcome(rank, "raised", code, result["type"], result["message"],
                           result["traceback"], tail, ended)
    if code == 0 and (result is None or result.get("status") == "ok"):
        return RankOutcome(rank, "ok", code, ended_s=ended)
    return RankOutcome(rank, "died", code, stderr_tail=tail, ended_s=ended)


def _culprit(outcomes: list[RankOutcome]) -> RankOutcome:
    """The rank that most likely caused the failure: the first to raise an error of its own
    (not a collective failing because of a peer) or to die; else a rank the launcher had to
    stop (its peers timed out waiting for it); else the first failure."""
    failed = sorted((o for o in outcomes if o.status != "ok"), key=lambda o: o.ended_s)
    own = [o for o in failed if o.status == "died" or (
        o.status == "raised" and "a peer rank failed or exited" not in o.message
        and "timed out" not in o.message)]
    if own:
        return own[0]
    stuck = [o for o in failed if o.status == "stopped"]
    return (stuck or failed)[0]


def _check_function(fn) -> None:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", "")
    if module in (None, "__main__") or "<locals>" in name or "<lambda>" in name:
        raise ValueError(
            f"launch() starts fresh Python processes (spawn, not fork), which import the "
            f"function by module and name; {name or fn!r} is defined in "
            f"{'a notebook or script (__main__)' if module in (None, '__main__') else module} "
            "where they cannot find it. Put it in a module file: in a notebook, "
            "`%%writefile my_ranks.py` then `from my_ranks import step`.")
    try:
        pickle.dumps(fn)
    except Exception as error:
        raise ValueError(f"launch() cannot send {name} to the ranks: {error}") from error


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _load(path: str):
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines())
