"""What torch.compile did over a sequence of calls, as plain data (no pictures here).

One `CompileLog` per watched function: the calls in order (`CallRecord`: which cache entry
served each, or that it compiled, or that it ran eagerly because the recompile limit was
hit), and every cache entry Dynamo made (`CompileEntry`: its guards as Dynamo states them,
the guard failures that caused it). The views in viz/guard_views.py only read these.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

# Guard kinds that are bookkeeping of Dynamo itself (ambient state, the subclass's inner
# tensor, dynamic-dim markers, module globals): kept in the record, hidden by default.
_BOOKKEEPING = frozenset({
    "GLOBAL_STATE", "TORCH_FUNCTION_MODE_STACK", "DEFAULT_DEVICE", "NO_TENSOR_ALIASING",
    "DIMENSION_DYNAMIC_MARKING_GUARD", "DICT_CONTAINS", "NO_HASATTR", "DICT_VERSION",
})
_ADDRESS = re.compile(r"\b\d{9,}\b")  # object ids and type ids: different in every process
_METADATA_ID = re.compile(r"___check_metadata_\d+_")
_DISPATCH_KEYS = re.compile(r"DispatchKeySet\([^)]*\), ")
_TENSOR = re.compile(r"check_tensor\((?P<src>[^,]+), (?P<cls>\w+), torch\.(?P<dtype>\w+), "
                     r"device=(?P<dev>[^,]+), requires_grad=(?P<rg>\w+), "
                     r"size=(?P<size>\[[^\]]*\]), "
                     r"stride=(?P<stride>\[[^\]]*\])\)")
_TYPE = re.compile(r"___check_type_id\((?P<src>[^,]+), <id>\), type=<class '(?P<cls>[^']+)'>")


@dataclass(frozen=True)
class Guard:
    """One check Dynamo runs before reusing compiled code."""

    kind: str  # Dynamo's leaf guard: TENSOR_MATCH, EQUALS_MATCH, TYPE_MATCH, SHAPE_ENV, ...
    text: str  # the check as Dynamo states it (object ids masked as "<id>")
    where: str = ""  # the user's line that made Dynamo add it

    @property
    def user_facing(self) -> bool:
        """A guard about the user's values (not Dynamo's bookkeeping or the device's inner
        tensor, which mirrors its wrapper's)."""
        return (self.kind not in _BOOKKEEPING and "._inner" not in self.text
                and "__tensor_flatten__" not in self.text and "G['__import_" not in self.text
                and "___check_metadata_" not in self.text
                and "top_saved_tensors_hooks" not in self.text)

    @classmethod
    def from_dynamo(cls, kind: str, verbose: str) -> Guard:
        code, _, where = verbose.partition("  # ")
        where = where.rsplit("  # ", 1)[-1].split(" (HINT")[0].strip()
        where = where.rsplit("/", 1)[-1]  # Dynamo cuts paths mid-name: keep the file name
        code = _DISPATCH_KEYS.sub("", _METADATA_ID.sub("___check_metadata_<id>_", code.strip()))
        return cls(kind, _ADDRESS.sub("<id>", code), where)



def short_guard(guard: Guard) -> str:
    """A guard in a few words: "L['x']: float32 size=[4] stride=[1]", "type(L['x']) is
    MTIATensor"; others as Dynamo wrote them."""
    found = _TENSOR.search(guard.text)
    if found:
        size = found["size"].replace("None", "*")
        grad = ", requires_grad" if found["rg"] == "True" else ""
        return f"{found['src']}: {found['dtype']} size={size} stride={found['stride']}{grad}"
    found = _TYPE.search(guard.text)
    if found:
        return f"type({found['src']}) is {found['cls'].rsplit('.', 1)[-1]}"
    return guard.text


@dataclass(frozen=True)
class CompileEntry:
    """One cache entry: a compiled graph and the guards that decide when it is reused."""

    compile_id: str  # "0/1": frame 0, its second compile
    guards: tuple[Guard, ...]
    reasons: tuple[str, ...] = ()  # the guard failures that made Dynamo compile it
    graph_ops: int | None = None  # ops in Dynamo's graph (compilation_metrics)

    @property
    def dynamic(self) -> bool:
        """Compiled for symbolic sizes: its shape guards are ranges, not exact sizes."""
        return any(g.kind == "SHAPE_ENV" for g in self.guards) or any(
            "size=[None" in g.text or ", None" in g.text
            for g in self.guards if g.kind == "TENSOR_MATCH")

    def user_guards(self) -> tuple[Guard, ...]:
        return tuple(g for g in self.guards if g.user_facing)


# What a failed guard was about, in the words a learner looks for.
_REASON_KINDS = (
    ("size mismatch", "shape"), ("stride mismatch", "stride"), ("dtype mismatch", "dtype"),
    ("device mismatch", "device"), ("requires_grad mismatch", "requires_grad"),
    ("___check_type_id", "type"), ("___check_obj_id", "object identity"),
    ("recompile limit", "recompile limit"),
)


def reason_kind(reason: str) -> str:
    """"shape", "dtype", "Python value", "module attribute", ... for one failed guard."""
    for needle, kind in _REASON_KINDS:
        if needle in reason:
            return kind
    body = reason.split(": ", 1)[-1]
    if re.match(r"[\w\[\]'\.]*\.\w+ [=!]=", body) or "_modules[" in body:
        return "module attribute"  # an attribute read through an object: self.factor == 2.0
    if " == " in reason or " != " in reason:
        return "Python value"
    if "<=" in reason or ">=" in reason or "size()" in reason:
        return "shape range"
    return "other"


def clean_reason(reason: str) -> str:
    """Dynamo's failure text without its user stack and source comment, ids masked:
    "0/0: n == 2" or "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5"."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    first = first.split("  # ")[0].rstrip()
    return _ADDRESS.sub("<id>", first)


@dataclass(frozen=True)
class CallRecord:
    """One call of the watched function and what served it."""

    index: int
    args: str  # "x: float32[4], n=2"
    outcome: str  # "compiled" | "cache hit" | "eager (recompile limit)"
    entry: str | None  # compile id of the cache entry that ran it; None when it ran eagerly
    reasons: tuple[str, ...] = ()  # a recompile: the guards that failed, as Dynamo says
    cache: tuple[str, ...] = ()  # the cache after the call, most recently used first


OUTCOMES = ("compiled", "cache hit", "eager (recompile limit)")


@dataclass
class CompileLog:
    """Everything recorded for one watched function."""

    name: str
    backend: str
    dynamic: bool | None
    recompile_limit: int
    function: str = ""  # the function's own name (`name` is what the views call the log)
    # Dynamo's own count (counters["unimplemented"]) of recompile-limit hits during the calls:
    # once per function, after which it runs cache misses eagerly without counting again.
    dynamo_limit_hits: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    entries: dict[str, CompileEntry] = field(default_factory=dict)

    @property
    def compiles(self) -> int:
        return sum(c.outcome == "compiled" for c in self.calls)

    @property
    def recompiles(self) -> int:
        return max(0, self.compiles - 1)

    @property
    def eager_calls(self) -> int:
        return sum(c.outcome.startswith("eager") for c in self.calls)

    @property
    def limit_hit(self) -> bool:
        return self.eager_calls > 0

    @property
    def storm(self) -> bool:
        """A recompile storm: the limit was hit, or most calls recompiled (3 or more)."""
        return self.limit_hit or (self.recompiles >= 3 and self.compiles * 2 > len(self.calls))

    def reason_kinds(self) -> dict[str, int]:
        """What the recompiles were about: kind of the first failed guard -> count."""
        kinds: dict[str, int] = {}
        for call in self.calls:
            if call.outcome == "compiled" and call.reasons:
                kind = reason_kind(call.reasons[0])
                kinds[kind] = kinds.get(kind, 0) + 1
        return kinds

    def to_dict(self) -> dict:
        return asdict(self)
