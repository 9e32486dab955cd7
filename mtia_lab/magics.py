"""IPython magics: `%mtia_trace <statement>` and `%%mtia_trace`, loaded by `%load_ext mtia_lab`.

Built like IPython's own `%time` (IPython/core/magics/execution.py): options parsed with
`magic_arguments` and `partial=True`, so the rest of the line is the statement; no `{var}`
expansion of user code; the statement runs in the user's namespace and its value is returned
(so it shows as `Out[n]`). Around the statement:

    with mtia_lab.trace(label) as t:    # and mtia_lab.strict() with --strict
        value = <statement>             # or the cell, compiled with --compile
    _mtia_trace = t                     # --var NAME to choose the name
    display(view(t))                    # --view summary|tree|graph|explorer|table|none

If the statement raises, the trace holds what was recorded up to the failure (the failing op
is an event whose `reason` starts with "raised"); it is bound and shown, and then the error is
raised again so the user sees their own traceback, as `%time` does.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import keyword
import os
import re
from typing import Any

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import (
    Magics,
    line_cell_magic,
    magics_class,
    needs_local_scope,
    no_var_expand,
    output_can_be_silenced,
)

_UNSET = object()  # a name the cell assigns that had no value before
VIEWS = ("summary", "tree", "graph", "explorer", "table", "none")
DEFAULT_VAR = "_mtia_trace"


def make_view(trace, view: str, times: bool | str = True):
    """The view object `--view` names (None for "none")."""
    from .viz import trace_explorer, trace_graph, trace_summary, trace_table, trace_tree

    if view == "summary":
        return trace_summary(trace, times=times)
    if view == "tree":
        return trace_tree(trace, times=times)
    if view == "graph":
        return trace_graph(trace)
    if view == "explorer":
        return trace_explorer(trace, times=times is True)
    if view == "table":
        return trace_table(trace, times=times is True)
    if view == "none":
        return None
    raise UsageError(f"--view {view!r}: choose one of {', '.join(VIEWS)}")


@magics_class
class TraceMagics(Magics):
    """The %mtia_trace magics; `self.compiled` caches --compile functions by cell source."""

    def __init__(self, shell=None) -> None:
        super().__init__(shell)
        self.compiled: dict[str, Any] = {}

    @no_var_expand
    @magic_arguments.magic_arguments()
    @magic_arguments.argument(
        "--view", default="summary", choices=VIEWS,
        help="what to show after the run: the per-op summary table (default), the module "
             "tree, the dataflow graph, the live explorer widget, a static table of events, "
             "or nothing",
    )
    @magic_arguments.argument(
        "--strict", action="store_true",
        help="run under mtia_lab.strict(): an op without a native kernel raises "
             "StrictModeError instead of using the CPU fallback",
    )
    @magic_arguments.argument("--save", metavar="FILE",
                              help="save the trace as mtia_lab JSON (load_trace reads it)")
    @magic_arguments.argument("--chrome", metavar="FILE",
                              help="save a Chrome trace event file (open in ui.perfetto.dev)")
    @magic_arguments.argument("--var", default=DEFAULT_VAR, metavar="NAME",
                              help=f"the variable the Trace is bound to (default {DEFAULT_VAR})")
    @magic_arguments.argument(
        "--compile", action="store_true",
        help='run the statement or cell as a function compiled by torch.compile(fn, '
             'backend="mtia_lab"); names it assigns stay in the namespace',
    )
    @magic_arguments.argument(
        "--no-times", action="store_true", dest="no_times",
        help="hide host wall times (they change at every run), keep the simulated ones: for "
             "output compared by nbval",
    )
    @magic_arguments.argument("--label", default="", help="a label stored in the trace")
    @magic_arguments.argument(
        "--full-traceback", action="store_true", dest="full_traceback",
        help="on an error, keep the frames inside torch and mtia_lab in the traceback (by "
             "default only the user's own frames are shown)",
    )
    @magic_arguments.kwds(epilog="Any remaining arguments are the code to trace.")
    @needs_local_scope
    @line_cell_magic
    @output_can_be_silenced
    def mtia_trace(self, line: str = "", cell: str | None = None, local_ns=None):
        """Trace what a statement or cell does on the mtia_sim device.

            %mtia_trace model(x).sum()
            %%mtia_trace --view tree --var t
            loss = model(x).sum()
            loss.backward()

        The Trace is bound to `_mtia_trace` (or --var NAME) even if the code raises.
        """
        __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
        args, extra = magic_arguments.parse_argstring(self.mtia_trace, line, partial=True)
        _refuse_unknown_option(self.mtia_trace.parser, extra)
        for name in ("label", "save", "chrome"):  # IPython splits the line keeping quotes
            setattr(args, name, _unquote(getattr(args, name)))
        statement = " ".join(extra)
        if statement and cell:
            raise UsageError("%%mtia_trace takes the code from the cell: remove "
                             f"{statement!r} from the magic's line (options only there)")
        if not args.var.isidentifier() or keyword.iskeyword(args.var):
            raise UsageError(f"--var {args.var!r} is not a Python name: use e.g. --var t")
        source = cell if cell is not None else statement
        if not source.strip():
            raise UsageError("nothing to trace: %mtia_trace <statement>, or %%mtia_trace with "
                             "the code in the cell")
        run = self._compiled_runner(source) if args.compile else self._runner(source, local_ns)
        return self._trace(run, args)

    # -- running the code ------------------------------------------------------------------
    def _runner(self, source: str, local_ns):
        """A function running `source` as %time does: eval a lone expression, else exec the
        cell and eval its last expression (the value returned)."""
        tree = self._parse(source)
        glob = self.shell.user_ns
        if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
            code = self._compile(ast.Expression(tree.body[0].value), source, "eval")

            def run_eval():
                __tracebackhide__ = True  # noqa: F841
                return eval(code, glob, local_ns)

            return run_eval
        last = None
        if len(tree.body) > 1 and isinstance(tree.body[-1], ast.Expr):
            last = self._compile(ast.Expression(tree.body[-1].value), source, "eval")
            tree = ast.Module(tree.body[:-1], [])
        code = self._compile(tree, source, "exec")

        def run():
            __tracebackhide__ = True  # noqa: F841
            exec(code, glob, local_ns)
            return None if last is None else eval(last, glob, local_ns)

        return run

    def _compiled_runner(self, source: str):
        """The code as the body of a function `torch.compile(..., backend="mtia_lab")`
        compiles. The names the code assigns are the function's parameters (called with their
        current values) and come back with its result, so they land in the user's namespace
        as they would without --compile. (Not `global` statements: Dynamo cannot yet write a
        device tensor to a global.) Cached by source: running the cell again reuses the
        compiled function, and Dynamo's guards decide when to recompile."""
        import torch

        entry = self.compiled.get(source)
        if entry is None:
            tree = self._parse(source)
            body = list(tree.body)
            value: ast.expr = ast.Constant(None)
            if body and isinstance(body[-1], ast.Expr):
                value = body.pop().value
            names = sorted(_assigned_names(tree.body))
            body.append(ast.Return(ast.Tuple(
                [value, ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load())],
                ast.Load())))
            fn_def = ast.parse(f"def _mtia_trace_cell({', '.join(names)}): pass").body[0]
            fn_def.body = body
            module = ast.fix_missing_locations(ast.Module([fn_def], []))
            namespace: dict = {}
            exec(self._compile(module, source, "exec"), self.shell.user_ns, namespace)
            fn = torch.compile(namespace["_mtia_trace_cell"], backend="mtia_lab")
            entry = self.compiled[source] = (fn, names)
        fn, names = entry
        user_ns = self.shell.user_ns

        def run():
            __tracebackhide__ = True  # noqa: F841
            value, results = fn(*[user_ns.get(n, _UNSET) for n in names])
            user_ns.update((n, v) for n, v in zip(names, results, strict=True) if v is not _UNSET)
            return value

        return run

    def _compile(self, tree: ast.AST, source: str, mode: str):
        """Compile under a file name IPython keeps the source of, so tracebacks show the
        user's lines (and traced events name them as their source)."""
        from .source import running_cell_number

        cache = self.shell.compile.cache
        name = cache(self.shell.transform_cell(source), running_cell_number(self.shell))
        return self.shell.compile(tree, name, mode)

    def _parse(self, source: str) -> ast.Module:
        shell = self.shell
        return shell.transform_ast(shell.compile.ast_parse(shell.transform_cell(source)))

    # -- tracing, binding, showing ---------------------------------------------------------
    def _trace(self, run, args):
        __tracebackhide__ = True  # noqa: F841
        import mtia_lab

        strict = mtia_lab.strict() if args.strict else contextlib.nullcontext()
        tracer = mtia_lab.trace(args.label or "%mtia_trace")
        error: BaseException | None = None
        value = None
        try:
            with strict, tracer:
                value = run()
        except Exception as exc:  # shown below, then raised again
            error = exc
        except BaseException:  # KeyboardInterrupt: stop at once, keeping what was recorded
            if tracer.trace is not None:
                self.shell.user_ns[args.var] = tracer.trace
            raise
        trace = tracer.trace  # compiled regions appear in it as "compiled" kernel events
        self.shell.user_ns[args.var] = trace
        if args.save:
            mtia_lab.trace.io.save_trace(trace, args.save)
        if args.chrome:
            mtia_lab.trace.io.save_chrome_trace(trace, args.chrome)
        view = make_view(trace, args.view, "sim" if args.no_times else True)
        if view is not None:
            from IPython.display import display

            display(view)
        if error is not None:
            hidden = 0 if args.full_traceback else _keep_user_frames(error)
            print(_error_note(trace, error, args.var, hidden))
            raise error
        return value


_OPTION = re.compile(r"(--?)[A-Za-z][\w-]*(=.*)?")


def _refuse_unknown_option(parser, extra: list[str]) -> None:
    """`partial=True` hands every word argparse does not know to the statement, so a mistyped
    option (`--veiw tree`) would reach Python as code and fail as a SyntaxError inside the
    magic. A leading `--name` is never meant as code; a leading `-x` is, if the rest parses
    (`%mtia_trace -x.sum()`)."""
    if not extra or not _OPTION.fullmatch(extra[0]):
        return
    if extra[0].startswith("-") and not extra[0].startswith("--"):
        try:
            ast.parse(" ".join(extra))
            return
        except SyntaxError:
            pass
    known = sorted(o for o in parser._option_string_actions if o.startswith("--"))
    name = extra[0].split("=", 1)[0]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UsageError(f"%mtia_trace: unknown option {name}{hint}; the options are "
                     f"{', '.join(known)} (see %mtia_trace?)")


def _unquote(value: str | None) -> str | None:
    """`--label "one step"` arrives as '"one step"' (IPython's arg_split keeps the quotes: it splits
    with posix=False): drop one pair of matching quotes around an option's value."""
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _error_note(trace, error: BaseException, var: str, hidden: int) -> str:
    failed = [e for e in trace.events if e.reason.startswith("raised")]
    where = f"; the op that raised: #{failed[-1].index} {failed[-1].op}" if failed else ""
    n = len(trace.events)
    note = (f"mtia_trace: the code raised {type(error).__name__}; {n} event"
            f"{' was' if n == 1 else 's were'} recorded up to the failure{where}. "
            f"The trace is in `{var}`.")
    if hidden:
        note += (f"\n({hidden} frames inside torch and mtia_lab are left out of the traceback; "
                 "--full-traceback keeps them)")
    return note


def _library_dirs() -> tuple[str, ...]:
    import IPython
    import torch

    return tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, IPython)) + (
        os.path.dirname(os.path.abspath(__file__)) + os.sep,)


def _keep_user_frames(error: BaseException) -> int:
    """Unlink the traceback entries of frames in torch, IPython and mtia_lab, so the user sees
    their own frames (the error message, the last line, is unchanged); how many were cut."""
    entries = []
    tb = error.__traceback__
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    skip = _library_dirs()
    kept = [tb for tb in entries if not tb.tb_frame.f_code.co_filename.startswith(skip)]
    if not kept or len(kept) == len(entries):
        return 0
    for tb, after in zip(kept, [*kept[1:], None], strict=True):
        tb.tb_next = after
    error.__traceback__ = kept[0]
    return len(entries) - len(kept)


def _assigned_names(body: list[ast.stmt]) -> set[str]:
    """Names the statements bind at their own level (not inside nested functions/classes)."""
    names: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue  # its body is another scope
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def load_ipython_extension(ipython) -> None:
    """`%load_ext mtia_lab` (through mtia_lab.load_ipython_extension)."""
    ipython.register_magics(TraceMagics)
