"""The Helion front end's one source transformation: device loops become functions.

A Helion kernel is ordinary Python whose ``for … in hl.tile(…)`` / ``hl.grid(…)`` loops are the
device code. Python cannot hand a loop body to someone else, so the kernel's source is parsed
(``inspect.getsource``, as Helion itself does) and each device loop is rewritten into a nested
function plus a call into the runtime:

    for tile_m, tile_n in hl.tile([m, n]):          def _hl_device_0(_hl_idx, *, x, y, out):
        BODY                                  ->        tile_m, tile_n = _hl_idx
                                                        BODY'
                                                    _hl_rt.launch(0, hl.tile([m, n]),
                                                                  _hl_device_0,
                                                                  dict(x=x, y=y, out=out))

The outermost device loop becomes a *launch* (one Pallas kernel; its free host variables are
passed by name so that the runtime can swap host tensors for Pallas refs). A device loop nested
inside becomes an *inner loop*: a function of the tile and the loop-carried variables (names the
body assigns that were defined before the loop), run by the runtime as a ``lax.fori_loop``
(the first argument numbers the loop, for its block size):

    for tile_k in hl.tile(k):                 def _hl_inner_1(_hl_idx, _hl_carry):
        acc = acc + x[tile_m, tile_k] @ …  ->     tile_k = _hl_idx
                                                  (acc,) = _hl_carry
                                                  acc = acc + x[tile_m, tile_k] @ …
                                                  return (acc,)
                                              (acc,) = _hl_rt.inner_loop(1, hl.tile(k),
                                                                         _hl_inner_1, (acc,))

An ``if`` in device code evaluates its condition once. A condition decided while tracing (a
Python value, an ``hl.constexpr`` argument, ``bias is not None``) runs the ``if`` as written —
Helion's compile-time ``if``, so a variable may be assigned in one branch only. A device
scalar instead runs two functions of the variables the branches reassign:
``(a, b) = _hl_rt.device_if(cond, _hl_if_2_then, _hl_if_2_else, (a, b))``, a ``lax.cond``.
A variable some ``if`` assigns may be unbound where a loop or branch carries it: it travels
as ``_hl_rt.UNBOUND`` (``_bind_if_unbound``).

Names bound inside a nested ``def``, ``lambda``, class or comprehension are that scope's own,
never carried (``_stored_names``).

Line numbers are kept, so errors and tracebacks point at the user's source lines.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap

from tpukit.helion import exc

RT = "_hl_rt"
_LOOP_FUNCS = ("tile", "grid", "jagged_tile")


def is_device_loop(node: ast.AST) -> bool:
    """``for … in <something>.tile(…)`` / ``tile(…)`` / ``….grid(…)``."""
    if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
        return False
    f = node.iter.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return name in _LOOP_FUNCS


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _stored_names(nodes) -> set[str]:
    """The names ``nodes`` bind in their own scope: not those bound inside a nested ``def``,
    ``class``, ``lambda`` or comprehension (their own locals), except the nested definition's
    name and a comprehension's ``:=`` targets, which bind in the enclosing scope."""
    out: set[str] = set()

    def visit(n):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, _SCOPES):
            if not isinstance(n, ast.Lambda):
                out.add(n.name)
            return
        elif isinstance(n, _COMPREHENSIONS):
            out.update(
                sub.target.id
                for sub in ast.walk(n)
                if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name)
            )
            return
        for child in ast.iter_child_nodes(n):
            visit(child)

    for n in nodes:
        visit(n)
    return out


def _walk_scope(node: ast.AST):
    """``ast.walk`` of ``node`` without the bodies of nested ``def``s, classes and lambdas
    (a ``return`` there is theirs)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if n is node or not isinstance(n, _SCOPES):
            todo.extend(ast.iter_child_nodes(n))


def _conditional_names(fn: ast.FunctionDef) -> set[str]:
    """Names some ``if`` of ``fn`` binds: at run time they may be unbound where later code
    passes them on (a compile-time ``if`` that assigns in one branch only)."""
    return {
        name
        for sub in ast.walk(fn)
        if isinstance(sub, ast.If)
        for name in _stored_names(sub.body) | _stored_names(sub.orelse)
    }


def _bind_if_unbound(names) -> list[ast.stmt]:
    """``try: name / except NameError: name = _hl_rt.UNBOUND`` for each name: lets a variable
    that a compile-time ``if`` did not assign travel through loops and branches unused."""
    out = []
    for n in sorted(names):
        out.append(
            ast.Try(
                body=[ast.Expr(ast.Name(n, ast.Load()))],
                handlers=[
                    ast.ExceptHandler(
                        type=ast.Name("NameError", ast.Load()),
                        name=None,
                        body=[
                            ast.Assign(
                                targets=[ast.Name(n, ast.Store())],
                                value=ast.Attribute(ast.Name(RT, ast.Load()), "UNBOUND",
                                                    ast.Load()),
                            )
                        ],
                    )
                ],
                orelse=[],
                finalbody=[],
            )
        )
    return out


def _loaded_names(nodes) -> set[str]:
    out: set[str] = set()
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                out.add(sub.id)
    return out


def _function_locals(fn: ast.FunctionDef) -> set[str]:
    a = fn.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    if a.vararg:
        params.add(a.vararg.arg)
    if a.kwarg:
        params.add(a.kwarg.arg)
    return params | _stored_names(fn.body)


def _at_site(site: int) -> ast.Call:
    """``_hl_rt.at_site(site)``: evaluated just before the loop's ``hl.tile(...)``, so the block
    sizes that call allocates belong to this loop (``_state.allocate_block_id``)."""
    return ast.Call(
        func=ast.Attribute(ast.Name(RT, ast.Load()), "at_site", ast.Load()),
        args=[ast.Constant(site)],
        keywords=[],
    )


def _check_loop(node: ast.For, filename: str) -> None:
    where = f"{filename}:{node.lineno}"
    if node.orelse:
        raise exc.DeviceLoopElseBlock(f"a device loop's `else:` block (at {where})")
    for sub in _walk_scope(node):
        if isinstance(sub, ast.Break) and _owner_loop(node, sub) is node:
            raise exc.StatementNotSupported(
                f"`{type(sub).__name__.lower()}` in a device loop (at {filename}:{sub.lineno})"
            )
        if isinstance(sub, ast.Return):
            raise exc.StatementNotSupported(
                f"`return` inside a device loop (at {filename}:{sub.lineno})"
            )
        if isinstance(sub, (ast.Global, ast.Nonlocal)):
            raise exc.StatementNotSupported(
                f"`{type(sub).__name__.lower()}` inside a device loop (at {filename}:{sub.lineno})"
            )


class _ContinueAsReturn(ast.NodeTransformer):
    """Turns the ``continue`` statements of one device loop (not of loops or functions nested
    in it) into ``return <value>`` of the function its body becomes: the iteration ends
    there. A ``continue`` under a compile-time ``if`` then works as in Helion; under a device
    condition, the ``if`` stays Python and its condition raises as data-dependent."""

    def __init__(self, value):
        self.value = value

    def visit_Continue(self, node):
        return ast.copy_location(ast.Return(self.value()), node)

    def _skip(self, node):
        return node

    visit_For = visit_While = visit_FunctionDef = visit_AsyncFunctionDef = _skip
    visit_Lambda = visit_ClassDef = _skip


class _BuiltinMinMax(ast.NodeTransformer):
    """``min(a, b, …)``/``max(a, b, …)`` in device code call ``_hl_rt.builtin_min``/``_max``,
    which also take device scalars (``min(tile.begin + chunk, n)``), as Helion's do."""

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if (isinstance(f, ast.Name) and f.id in ("min", "max") and len(node.args) >= 2
                and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)):
            node.func = ast.copy_location(
                ast.Attribute(ast.Name(RT, ast.Load()), f"builtin_{f.id}", ast.Load()), f)
        return node


def _continue_as_return(body, value) -> list:
    t = _ContinueAsReturn(value)
    return [t.visit(s) for s in body]


def _owner_loop(root: ast.For, target: ast.AST):
    """The innermost For/While enclosing ``target`` within ``root``."""
    owner = None

    def visit(n, current):
        nonlocal owner
        if n is target:
            owner = current
            return
        for child in ast.iter_child_nodes(n):
            visit(child, n if isinstance(n, (ast.For, ast.While)) and n is not target else current)

    visit(root, root)
    return owner


class _Rewriter:
    def __init__(self, filename: str, conditional: set[str]):
        self.filename = filename
        self.counter = 0
        self.conditional = conditional  # see _conditional_names

    def _name(self, kind: str) -> str:
        self.counter += 1
        return f"_hl_{kind}_{self.counter}"

    # --- host level ---------------------------------------------------------------------

    def host_block(self, stmts, host_locals: set[str]):
        out = []
        for s in stmts:
            if is_device_loop(s):
                out.extend(self.launch(s, host_locals))
                continue
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(s, field, None), list) and not isinstance(
                    s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
                ):
                    setattr(s, field, self.host_block(getattr(s, field), host_locals))
            if isinstance(s, ast.Try):
                for h in s.handlers:
                    h.body = self.host_block(h.body, host_locals)
            out.append(s)
        return out

    def launch(self, loop: ast.For, host_locals: set[str]):
        _check_loop(loop, self.filename)
        name = self._name("device")
        site = self.counter
        assigned = _stored_names(loop.body) | _stored_names([loop.target])
        free = sorted((_loaded_names(loop.body) & host_locals) - assigned)
        body = [ast.Assign(targets=[loop.target], value=ast.Name("_hl_idx", ast.Load()))]
        loop_body = _continue_as_return(loop.body, lambda: None)
        loop_body = [_BuiltinMinMax().visit(st) for st in loop_body]
        body += self.device_block(loop_body, {"_hl_idx", *free} | _stored_names([loop.target]))
        fn = ast.FunctionDef(
            name=name,
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg("_hl_idx")],
                vararg=None,
                kwonlyargs=[ast.arg(f) for f in free],
                kw_defaults=[None] * len(free),
                kwarg=None,
                defaults=[],
            ),
            body=body,
            decorator_list=[],
            returns=None,
        )
        env = ast.Call(
            func=ast.Name("dict", ast.Load()),
            args=[],
            keywords=[ast.keyword(f, ast.Name(f, ast.Load())) for f in free],
        )
        call = ast.Expr(
            ast.Call(
                func=ast.Attribute(ast.Name(RT, ast.Load()), "launch", ast.Load()),
                args=[_at_site(site), loop.iter, ast.Name(name, ast.Load()), env],
                keywords=[],
            )
        )
        guards = _bind_if_unbound(set(free) & self.conditional)
        ast.copy_location(fn, loop)
        for g in [call, *guards]:
            _at_header(g, loop.iter)
        return [fn, *guards, call]

    # --- device level -------------------------------------------------------------------

    def device_block(self, stmts, defined: set[str]):
        """Rewrites nested device loops and ``if`` statements; ``defined`` grows with the
        names assigned so far."""
        out = []
        for i, s in enumerate(stmts):
            if is_device_loop(s):
                # names first assigned inside the loop stay local to it (only carried ones,
                # already defined, live on)
                out.extend(self.inner(s, defined))
                continue
            if isinstance(s, ast.If) and _branchable(s):
                out.extend(self.device_if(s, defined, stmts[i + 1 :]))
                defined |= _stored_names([s])
                continue
            else:
                for field in ("body", "orelse"):
                    if isinstance(getattr(s, field, None), list) and not isinstance(
                        s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
                    ):
                        setattr(s, field, self.device_block(getattr(s, field), defined))
                out.append(s)
            defined |= _stored_names([s])
        return out

    def device_if(self, node: ast.If, defined: set[str], rest):
        """``if cond: A else: B`` in device code. The condition is evaluated once; when it is
        decided while tracing (a Python value, an ``hl.constexpr`` argument, ``x is not
        None``) the ``if`` runs as written, as in Helion. Only a device scalar makes a device
        branch: both branches become functions of the variables they reassign, run by
        ``device_if`` as a ``lax.cond``, which needs a variable assigned in one branch only
        to be unused after the ``if`` (else it raises, when the condition turns out to be a
        device value)."""
        name = self._name("if")
        cond = ast.Name(f"{name}_cond", ast.Load())
        then_names, else_names = _stored_names(node.body), _stored_names(node.orelse)
        carried = sorted((then_names | else_names) & defined)
        outputs = carried + sorted((then_names & else_names) - defined)
        one_sided = ((then_names ^ else_names) - defined) & _loaded_names(rest)

        def branch(suffix, stmts):
            body = []
            if carried:
                body.append(ast.Assign(targets=[_names(carried, ast.Store)],
                                       value=ast.Name("_hl_carry", ast.Load())))
            body += self.device_block(copy.deepcopy(stmts) or [ast.Pass()], set(defined))
            body.append(ast.Return(_names(outputs, ast.Load)))
            return _function(f"{name}_{suffix}", ["_hl_carry"], body)

        if one_sided:
            device = [_rt_call("one_sided_if", [ast.Constant(
                f"`{sorted(one_sided)[0]}` is assigned in only one branch of a device `if` and "
                f"used after it (at {self.filename}:{node.lineno}); assign it before the `if`"
            )])]
        else:
            fns = [branch("then", node.body), branch("else", node.orelse)]
            call = _rt_call("device_if", [ast.Name(cond.id, ast.Load()),
                                          ast.Name(fns[0].name, ast.Load()),
                                          ast.Name(fns[1].name, ast.Load()),
                                          _names(carried, ast.Load)]).value
            stmt = (ast.Assign(targets=[_names(outputs, ast.Store)], value=call) if outputs
                    else ast.Expr(call))
            device = [*fns, *_bind_if_unbound(set(carried) & self.conditional), stmt]
        decided = ast.If(
            test=ast.Name(cond.id, ast.Load()),
            body=self.device_block(node.body, set(defined)),
            orelse=self.device_block(node.orelse, set(defined)),
        )
        evaluate = ast.Assign(targets=[ast.Name(cond.id, ast.Store())], value=node.test)
        choose = ast.If(test=_rt_call("decided", [ast.Name(cond.id, ast.Load())]).value,
                        body=[decided], orelse=device)
        for n in (evaluate, choose, decided, *device):
            ast.copy_location(n, node)
        for n in (evaluate, choose, decided, *device):
            _at_header(n, node.test)
        return [evaluate, choose]

    def inner(self, loop: ast.For, defined: set[str]):
        _check_loop(loop, self.filename)
        name = self._name("inner")
        site = self.counter  # before the body's loops take the next numbers
        targets = _stored_names([loop.target])
        carried = sorted((_stored_names(loop.body) & defined) - targets)

        def tup(ctx):
            return ast.Tuple([ast.Name(c, ctx()) for c in carried], ctx())

        body = [ast.Assign(targets=[loop.target], value=ast.Name("_hl_idx", ast.Load()))]
        if carried:
            unpack = ast.Name("_hl_carry", ast.Load())
            body.append(ast.Assign(targets=[tup(ast.Store)], value=unpack))
        loop_body = _continue_as_return(loop.body, lambda: tup(ast.Load))
        body += self.device_block(loop_body, set(defined) | targets)
        body.append(ast.Return(tup(ast.Load)))
        fn = ast.FunctionDef(
            name=name,
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg("_hl_idx"), ast.arg("_hl_carry")],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            ),
            body=body,
            decorator_list=[],
            returns=None,
        )
        call = ast.Call(
            func=ast.Attribute(ast.Name(RT, ast.Load()), "inner_loop", ast.Load()),
            args=[_at_site(site), loop.iter, ast.Name(name, ast.Load()),
                  tup(ast.Load)],
            keywords=[],
        )
        stmt = ast.Assign(targets=[tup(ast.Store)], value=call) if carried else ast.Expr(call)
        guards = _bind_if_unbound(set(carried) & self.conditional)
        ast.copy_location(fn, loop)
        for g in [stmt, *guards]:
            _at_header(g, loop.iter)
        return [fn, *guards, stmt]


def _at_header(stmt: ast.stmt, header: ast.expr) -> None:
    """Puts a runtime call made for a loop or an ``if`` on the line of its header (``for … in
    hl.tile(…)``, ``if cond``), not spanning its body, so that errors point there."""
    for n in ast.walk(stmt):
        if n is stmt or not hasattr(n, "lineno") or n.lineno is None:
            ast.copy_location(n, header)


def _branchable(node: ast.If) -> bool:
    """Whether an ``if`` can become two functions: no ``break``/``continue`` (of an enclosing
    Python loop), ``return``, ``yield`` or scope statements in it."""
    flow = (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Global,
            ast.Nonlocal)
    return not any(isinstance(sub, flow) for sub in _walk_scope(node))


def _rt_call(fn: str, args) -> ast.Expr:
    """``_hl_rt.fn(*args)`` as a statement (``.value`` is the call)."""
    return ast.Expr(ast.Call(func=ast.Attribute(ast.Name(RT, ast.Load()), fn, ast.Load()),
                             args=args, keywords=[]))


def _names(names, ctx) -> ast.Tuple:
    return ast.Tuple([ast.Name(n, ctx()) for n in names], ctx())


def _function(name, params, body) -> ast.FunctionDef:
    return ast.FunctionDef(
        name=name,
        args=ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None,
                           kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=body,
        decorator_list=[],
        returns=None,
    )


def _strip_annotations(fn: ast.FunctionDef) -> None:
    a = fn.args
    for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if x is not None:
            x.annotation = None
    fn.returns = None


def rewrite(fn):
    """The rewritten version of ``fn`` (a plain function with the same signature), compiled
    against ``fn``'s globals (and a snapshot of its closure)."""
    try:
        source = inspect.getsource(fn)
        filename = inspect.getsourcefile(fn) or "<helion kernel>"
        _, first_line = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise exc.HelionError(
            f"kernel `{getattr(fn, '__name__', fn)}`: its source is needed ({e})"
        ) from None
    tree = ast.parse(textwrap.dedent(source))
    ast.increment_lineno(tree, first_line - 1)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise exc.HelionError(f"kernel `{fn.__name__}` must be a plain function (def)")
    for d in fdef.decorator_list:
        text = ast.unparse(d)
        if "kernel" not in text and "jit" not in text:
            raise exc.DecoratorAfterHelionKernelDecorator(
                f"kernel `{fn.__name__}`: the Helion decorator must be the innermost one "
                f"(found `@{text}` below it)"
            )
    fdef.decorator_list = []
    _strip_annotations(fdef)
    rw = _Rewriter(filename, _conditional_names(fdef))
    fdef.body = rw.host_block(fdef.body, _function_locals(fdef))
    if rw.counter == 0:
        raise exc.NoDeviceLoopsInKernel(
            f"kernel `{fn.__name__}` has no `hl.tile`/`hl.grid` loop (nothing runs on the device)"
        )
    # A factory binds the runtime module (and, for a kernel defined inside a function, a
    # snapshot of its closure) as enclosing variables of the rewritten function.
    freevars = fn.__code__.co_freevars
    factory = ast.FunctionDef(
        name="_hl_factory",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(RT)] + [ast.arg(v) for v in freevars],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[fdef, ast.Return(ast.Name(fdef.name, ast.Load()))],
        decorator_list=[],
        returns=None,
    )
    tree.body = [factory]
    ast.fix_missing_locations(tree)
    code = compile(tree, filename, "exec")
    namespace: dict = {}
    exec(code, fn.__globals__, namespace)  # noqa: S102 - the user's own kernel source
    from tpukit.helion import _runtime

    cells = [c.cell_contents for c in fn.__closure__ or ()]
    return namespace["_hl_factory"](_runtime, *cells), filename
