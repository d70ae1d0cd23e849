"""The ``when`` language: a tokenizer, a recursive-descent parser and a compiler to closures. Never ``eval``.

Grammar (lowest precedence first)::

    expr     := and ( "or" and )*
    and      := not ( "and" not )*
    not      := "not" not | test
    test     := operand [ cmp operand | "in" operand | "not" "in" operand | "matches" STRING ]
    cmp      := "==" | "!=" | "<" | "<=" | ">" | ">="
    operand  := literal | list | path | "exists" "(" path ")" | "len" "(" path ")" | "(" expr ")"
    path     := ("args" | "tool" | "agent" | "labels") ( "." NAME | "[" STRING | INT "]" )*
    list     := "[" [ literal ( "," literal )* [","] ] "]"
    literal  := NUMBER | "-" NUMBER | STRING | "true" | "false" | "null"

Types are strict, so a model cannot slip past a rule by changing a value's type: ``<`` and friends
compare two numbers or two strings and anything else is an evaluation error; ``==`` is false across
types (``1 == true`` is false); a missing path is an evaluation error except inside ``exists(...)``;
``matches`` is a full match of a string against a regex given as a literal (compiled once, at load).
Evaluation errors raise :class:`EvalError`, which the policy turns into "ask a person, because ...".
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._util import safe_repr, shorten
from ..errors import EvalError, ExpressionError

__all__ = ["EvalError", "Expression", "ExpressionError", "compile_expression"]

MAX_SOURCE = 4000
"""Longest expression accepted (characters)."""
MAX_DEPTH = 40
"""Deepest nesting of parentheses / ``not`` accepted; keeps the parser's recursion bounded."""
MAX_MATCH_INPUT = 10_000
"""Longest string ``matches`` runs a regex on; longer is an evaluation error (bounds regex time on hostile input)."""

ROOTS = ("args", "tool", "agent", "labels")
KEYWORDS = frozenset({"and", "or", "not", "in", "matches", "true", "false", "null", "exists", "len"})


class CallView(Protocol):
    """What an expression reads from a call."""

    @property
    def tool(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any]: ...
    @property
    def labels(self) -> Mapping[str, str]: ...


Evaluator = Callable[[CallView], Any]

# -- tokens ------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,|\.|-)
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # number | string | name | op | end
    text: str
    value: Any
    col: int


def _unquote(text: str, col: int) -> str:
    body = text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]  # the token regex guarantees a character follows
            if nxt not in _ESCAPES:
                raise ExpressionError(f"unknown escape \\{nxt} in a string (known: \\n \\t \\r \\\\ \\\" \\' \\0)", col)
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _tokenize(source: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:
            raise ExpressionError(f"unexpected character {source[pos]!r}", pos + 1)
        kind = m.lastgroup
        text = m.group()
        col = pos + 1
        pos = m.end()
        if kind == "ws":
            continue
        if kind == "number":
            value: Any = float(text) if any(c in text for c in ".eE") else int(text)
            if isinstance(value, float) and not math.isfinite(value):
                raise ExpressionError(f"number {text} is out of range", col)
        elif kind == "string":
            value = _unquote(text, col)
        else:
            value = text
        assert kind is not None
        tokens.append(_Tok(kind, text, value, col))
    tokens.append(_Tok("end", "", None, len(source) + 1))
    return tokens


# -- syntax tree ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lit:
    value: Any  # a scalar, or a tuple of scalars for a list literal


@dataclass(frozen=True, slots=True)
class _Path:
    root: str
    steps: tuple[str | int, ...]

    def show(self) -> str:
        out = self.root
        for step in self.steps:
            if isinstance(step, int):
                out += f"[{step}]"
            elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", step):
                out += f".{step}"
            else:
                out += f"[{step!r}]"
        return out


@dataclass(frozen=True, slots=True)
class _Call:
    func: str  # exists | len
    path: _Path


@dataclass(frozen=True, slots=True)
class _Not:
    operand: _Node


@dataclass(frozen=True, slots=True)
class _Bool:
    op: str  # and | or
    operands: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Cmp:
    op: str  # == != < <= > >= in notin matches
    left: _Node
    right: _Node
    col: int = field(repr=False, compare=False)  # kept out of the canonical form


_Node = _Lit | _Path | _Call | _Not | _Bool | _Cmp


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = _tokenize(source)
        self.i = 0
        self.depth = 0

    # token helpers
    def peek(self) -> _Tok:
        return self.tokens[self.i]

    def take(self) -> _Tok:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at(self, kind: str, text: str | None = None) -> bool:
        tok = self.tokens[self.i]
        return tok.kind == kind and (text is None or tok.text == text)

    def expect(self, kind: str, text: str, what: str) -> _Tok:
        if not self.at(kind, text):
            raise ExpressionError(f"expected {what}, found {_describe(self.peek())}", self.peek().col)
        return self.take()

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"nested more than {MAX_DEPTH} deep", self.peek().col)

    # grammar
    def parse(self) -> _Node:
        if self.at("end"):
            raise ExpressionError("empty expression", 1)
        node = self.expr()
        if not self.at("end"):
            raise ExpressionError(f"unexpected {_describe(self.peek())} after a complete expression", self.peek().col)
        return node

    def expr(self) -> _Node:
        return self.chain("or", self.conj)

    def conj(self) -> _Node:
        return self.chain("and", self.negation)

    def chain(self, op: str, sub: Callable[[], _Node]) -> _Node:
        first = sub()
        items = [first]
        while self.at("name", op):
            self.take()
            items.append(sub())
        return first if len(items) == 1 else _Bool(op, tuple(items))

    def negation(self) -> _Node:
        if self.at("name", "not"):
            self.take()
            self.nest()
            inner = self.negation()
            self.depth -= 1
            return _Not(inner)
        return self.test()

    def test(self) -> _Node:
        left = self.operand()
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return _Cmp(tok.text, left, self.operand(), tok.col)
        if self.at("name", "in"):
            self.take()
            return _Cmp("in", left, self.operand(), tok.col)
        if self.at("name", "not"):
            self.take()
            self.expect("name", "in", "'in' after 'not'")
            return _Cmp("notin", left, self.operand(), tok.col)
        if self.at("name", "matches"):
            self.take()
            pattern = self.peek()
            if pattern.kind != "string":
                raise ExpressionError("'matches' takes a regex in quotes", pattern.col)
            self.take()
            return _Cmp("matches", left, _Lit(pattern.value), pattern.col)
        return left

    def operand(self) -> _Node:
        tok = self.peek()
        if tok.kind == "number":
            self.take()
            return _Lit(tok.value)
        if tok.kind == "string":
            self.take()
            return _Lit(tok.value)
        if tok.kind == "op" and tok.text == "-":
            self.take()
            num = self.peek()
            if num.kind != "number":
                raise ExpressionError("'-' goes only before a number", tok.col)
            self.take()
            return _Lit(-num.value)
        if tok.kind == "op" and tok.text == "(":
            self.take()
            self.nest()
            inner = self.expr()
            self.depth -= 1
            self.expect("op", ")", "')'")
            return inner
        if tok.kind == "op" and tok.text == "[":
            return self.list_literal()
        if tok.kind == "name":
            if tok.text in ("true", "false", "null"):
                self.take()
                return _Lit({"true": True, "false": False, "null": None}[tok.text])
            if tok.text in ("exists", "len"):
                self.take()
                self.expect("op", "(", f"'(' after {tok.text}")
                path = self.path()
                self.expect("op", ")", f"')' closing {tok.text}(")
                return _Call(tok.text, path)
            if tok.text in ROOTS:
                return self.path()
            raise ExpressionError(
                f"unknown name {tok.text!r} (a path starts with one of {', '.join(ROOTS)}; strings need quotes)",
                tok.col,
            )
        raise ExpressionError(f"expected a value, found {_describe(tok)}", tok.col)

    def path(self) -> _Path:
        root = self.peek()
        if root.kind != "name" or root.text not in ROOTS:
            raise ExpressionError(f"expected a path starting with one of {', '.join(ROOTS)}", root.col)
        self.take()
        steps: list[str | int] = []
        while True:
            if self.at("op", "."):
                self.take()
                name = self.peek()
                if name.kind != "name":
                    raise ExpressionError(f"expected a field name after '.', found {_describe(name)}", name.col)
                self.take()
                steps.append(name.text)
            elif self.at("op", "["):
                self.take()
                key = self.peek()
                if key.kind == "string" or (key.kind == "number" and isinstance(key.value, int)):
                    self.take()
                    steps.append(key.value)
                else:
                    raise ExpressionError("expected a quoted key or a whole number inside [ ]", key.col)
                self.expect("op", "]", "']'")
            else:
                break
        if root.text in ("tool", "agent") and steps:
            raise ExpressionError(f"{root.text} is a string; it has no fields", root.col)
        if root.text == "labels" and (len(steps) != 1 or not isinstance(steps[0], str)):
            raise ExpressionError("labels takes exactly one name: labels.env", root.col)
        return _Path(root.text, tuple(steps))

    def list_literal(self) -> _Lit:
        start = self.take()
        items: list[Any] = []
        while not self.at("op", "]"):
            item = self.operand()
            if not isinstance(item, _Lit) or isinstance(item.value, tuple):
                raise ExpressionError("a list holds only numbers, strings, true, false and null", start.col)
            items.append(item.value)
            if not self.at("op", ","):
                break
            self.take()
        self.expect("op", "]", "']' or ','")
        return _Lit(tuple(items))


def _describe(tok: _Tok) -> str:
    return "the end" if tok.kind == "end" else repr(shorten(tok.text, 40))


# Tuples, not ``int | float``: a union written in a call is built anew on every call (hot paths).
_NUMBERS = (int, float)
_SEQUENCES = (list, tuple)
_SIZED = (str, list, tuple, Mapping)

# -- value helpers -------------------------------------------------------------------------------------


def _tag(value: Any) -> str:
    """The type family used by strict comparison; numbers are one family, bool is its own."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _NUMBERS):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, _SEQUENCES):
        return "list"
    return type(value).__name__


def _strict_eq(a: Any, b: Any) -> bool:
    ta, tb = _tag(a), _tag(b)
    if ta != tb:
        return False
    if ta == "list":
        return len(a) == len(b) and all(_strict_eq(x, y) for x, y in zip(a, b, strict=True))
    if ta == "object":
        return a.keys() == b.keys() and all(_strict_eq(a[k], b[k]) for k in a)
    return bool(a == b)


def _show(value: Any) -> str:
    return safe_repr(value, 60)


# -- compiler ------------------------------------------------------------------------------------------


def _compile_path(path: _Path) -> tuple[Evaluator, Evaluator]:
    """(getter raising EvalError when missing, exists-check returning bool)."""
    shown = path.show()
    root, steps = path.root, path.steps
    if root == "tool":
        return (lambda c: c.tool), (lambda c: True)
    if root == "agent":
        return (lambda c: c.agent), (lambda c: True)

    def walk(c: CallView) -> tuple[bool, Any]:
        cur: Any = c.labels if root == "labels" else c.args
        for step in steps:
            if isinstance(step, int):
                if not isinstance(cur, _SEQUENCES) or step >= len(cur):
                    return False, None
                cur = cur[step]
            else:
                if not isinstance(cur, Mapping) or step not in cur:
                    return False, None
                cur = cur[step]
        return True, cur

    def get(c: CallView) -> Any:
        found, value = walk(c)
        if not found:
            raise EvalError(f"{shown} is missing")
        return value

    def exists(c: CallView) -> Any:
        return walk(c)[0]

    if root == "args" and len(steps) == 1 and isinstance(steps[0], str):
        key = steps[0]  # the common case, args.amount, without the loop

        def get_one(c: CallView) -> Any:
            args = c.args
            try:
                return args[key]
            except (KeyError, TypeError):
                raise EvalError(f"{shown} is missing") from None

        def exists_one(c: CallView) -> Any:
            return isinstance(c.args, Mapping) and key in c.args

        return get_one, exists_one
    return get, exists


def _number(value: Any, what: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, _NUMBERS):
        raise EvalError(f"{what} is {_show(value)}, not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise EvalError(f"{what} is {_show(value)}, not a finite number")
    return value


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


Guard = tuple[str, Callable[[Any, Any], bool], Any]
"""``(key, order, bound)`` of a leading ``args.KEY <op> NUMBER`` test."""


class _Compiler:
    def __init__(self, source: str) -> None:
        self.source = source
        self.paths: list[str] = []
        self.fusible: dict[int, tuple[str, Callable[[Any, Any], bool], Any, str]] = {}
        """id(evaluator) → (key, order, bound, text) for ``args.KEY <op> NUMBER`` tests, fused into ``and``."""
        self.guards: dict[int, Guard] = {}
        """id(evaluator) → its guard: an ``and`` chain whose first test is ``args.KEY <op> NUMBER``."""

    def text(self, node: _Node) -> str:
        if isinstance(node, _Path):
            return node.show()
        if isinstance(node, _Call):
            return f"{node.func}({node.path.show()})"
        if isinstance(node, _Lit):
            return _show(list(node.value) if isinstance(node.value, tuple) else node.value)
        return "(expression)"

    def condition(self, node: _Node) -> Evaluator:
        """Compile a node used as a condition: it must yield a bool."""
        if isinstance(node, _Bool):
            parts = [self.condition(n) for n in node.operands]
            return self.chain(node.op == "and", parts)
        if isinstance(node, _Not):
            inner = self.condition(node.operand)
            return lambda c: not inner(c)
        if isinstance(node, _Cmp):
            return self.compare(node)
        if isinstance(node, _Lit):
            raise ExpressionError(f"the constant {self.text(node)} is not a condition", 1)
        value = self.value(node)
        shown = self.text(node)

        def truth(c: CallView) -> bool:
            v = value(c)
            if not isinstance(v, bool):
                raise EvalError(f"{shown} is {_show(v)}, not true or false")
            return v

        return truth

    def chain(self, conj: bool, parts: list[Evaluator]) -> Evaluator:
        """``a and b and ...`` / ``a or b or ...``, short-circuiting, as nested pairs: a chain that stops at
        its first operand costs one or two calls whatever its length (no generator)."""
        tail = parts[-1]
        for head in reversed(parts[:-1]):
            fuse = self.fusible.get(id(head)) if conj else None
            tail = _fused_and(fuse, tail) if fuse is not None else _pair(conj, head, tail)
        first = self.fusible.get(id(parts[0])) if conj else None
        if first is not None:
            self.guards[id(tail)] = first[:3]
        return tail

    def guard_of(self, fn: Evaluator) -> Guard | None:
        """The guard of a compiled condition (see :attr:`Expression.guard`), if it has one."""
        lone = self.fusible.get(id(fn))
        return lone[:3] if lone is not None else self.guards.get(id(fn))

    def value(self, node: _Node) -> Evaluator:
        if isinstance(node, _Lit):
            constant = node.value
            return lambda c: constant
        if isinstance(node, _Path):
            self.paths.append(node.show())
            return _compile_path(node)[0]
        if isinstance(node, _Call):
            self.paths.append(node.path.show())
            get, exists = _compile_path(node.path)
            if node.func == "exists":
                return exists
            shown = self.text(node.path)

            def length(c: CallView) -> int:
                v = get(c)
                if not isinstance(v, _SIZED):
                    raise EvalError(f"len({shown}): {_show(v)} has no length")
                return len(v)

            return length
        return self.condition(node)  # a parenthesised condition used as a value: true/false

    def compare(self, node: _Cmp) -> Evaluator:
        op, left, right = node.op, node.left, node.right
        if isinstance(left, _Lit) and isinstance(right, _Lit):
            raise ExpressionError(f"'{_op_text(op)}' compares two constants; one side must be a path", node.col)
        lhs = self.value(left)
        lhs_text = self.text(left)
        if op == "matches":
            pattern_text = right.value if isinstance(right, _Lit) else ""
            try:
                pattern = re.compile(pattern_text)
            except re.error as exc:
                raise ExpressionError(f"bad regex {_show(pattern_text)}: {exc}", node.col) from None
            full = pattern.fullmatch

            def matches(c: CallView) -> bool:
                v = lhs(c)
                if not isinstance(v, str):
                    raise EvalError(f"{lhs_text} is {_show(v)}, not a string ('matches' needs one)")
                if len(v) > MAX_MATCH_INPUT:
                    raise EvalError(f"{lhs_text} is {len(v)} characters, over the {MAX_MATCH_INPUT} 'matches' reads")
                return full(v) is not None

            return matches
        if op in ("in", "notin"):
            member = self.membership(node, lhs, lhs_text)
            if op == "in":
                return member
            return lambda c: not member(c)
        rhs = self.value(right)
        rhs_text = self.text(right)
        if op in ("==", "!="):
            if isinstance(right, _Lit) and not isinstance(right.value, tuple):
                constant, tag = right.value, _tag(right.value)
                if tag == "string":  # the common case without the generic helper

                    def eq_text(c: CallView) -> bool:
                        v = lhs(c)
                        return isinstance(v, str) and v == constant

                    if op == "==":
                        return eq_text
                    return lambda c: not eq_text(c)

            def eq(c: CallView) -> bool:
                return _strict_eq(lhs(c), rhs(c))

            if op == "==":
                return eq
            return lambda c: not eq(c)
        for side in (left, right):
            if isinstance(side, _Lit) and _tag(side.value) not in ("number", "string"):
                raise ExpressionError(f"'{op}' compares numbers or strings, not {self.text(side)}", node.col)
        order = _ORDER[op]
        if isinstance(right, _Lit) and _tag(right.value) == "number":
            bound = right.value

            isfinite = math.isfinite
            key = _single_arg(left)
            if key is not None:
                # The hot case, ``args.amount <= 50``: one frame, no helper calls on the fast path.
                def arg_cmp(c: CallView) -> bool:
                    try:
                        v = c.args[key]
                    except (KeyError, TypeError):
                        raise EvalError(f"{lhs_text} is missing") from None
                    cls = v.__class__
                    if cls is int or (cls is float and isfinite(v)):
                        return order(v, bound)
                    return order(_number(v, lhs_text), bound)

                self.fusible[id(arg_cmp)] = (key, order, bound, lhs_text)
                return arg_cmp

            def num_cmp(c: CallView) -> bool:
                return order(_number(lhs(c), lhs_text), bound)

            return num_cmp

        def cmp(c: CallView) -> bool:
            a, b = lhs(c), rhs(c)
            ta, tb = _tag(a), _tag(b)
            if ta == tb == "string":
                return order(a, b)
            if ta == "string" or tb == "string":
                raise EvalError(f"'{op}' between {lhs_text} = {_show(a)} and {rhs_text} = {_show(b)}: not comparable")
            return order(_number(a, lhs_text), _number(b, rhs_text))

        return cmp

    def membership(self, node: _Cmp, lhs: Evaluator, lhs_text: str) -> Evaluator:
        right = node.right
        if isinstance(right, _Lit):
            if not isinstance(right.value, tuple):
                if not isinstance(right.value, str):
                    raise ExpressionError("'in' needs a list, a string or a path on its right", node.col)
                haystack = right.value

                def in_text(c: CallView) -> bool:
                    v = lhs(c)
                    if not isinstance(v, str):
                        raise EvalError(f"{lhs_text} is {_show(v)}; 'in' a string needs a string")
                    return v in haystack

                return in_text
            keys = frozenset((_tag(v), v) for v in right.value)
            strings = frozenset(v for t, v in keys if t == "string")
            key = _single_arg(node.left)
            if key is not None:
                # ``args.currency in ['EUR', 'USD']``: one frame, and a string needs no type tag.
                def in_list_arg(c: CallView) -> bool:
                    try:
                        v = c.args[key]
                    except (KeyError, TypeError):
                        raise EvalError(f"{lhs_text} is missing") from None
                    if v.__class__ is str:
                        return v in strings
                    tag = _tag(v)
                    return tag not in ("list", "object") and (tag, v) in keys

                return in_list_arg

            def in_list(c: CallView) -> bool:
                v = lhs(c)
                tag = _tag(v)
                if tag in ("list", "object"):
                    return False  # a list literal holds scalars only
                return (tag, v) in keys

            return in_list
        rhs = self.value(right)
        rhs_text = self.text(right)

        def in_value(c: CallView) -> bool:
            v, container = lhs(c), rhs(c)
            if isinstance(container, str):
                if not isinstance(v, str):
                    raise EvalError(f"{lhs_text} is {_show(v)}; 'in' a string needs a string")
                return v in container
            if isinstance(container, Mapping):
                return isinstance(v, str) and v in container
            if isinstance(container, _SEQUENCES):
                return any(_strict_eq(v, item) for item in container)
            raise EvalError(f"{rhs_text} is {_show(container)}; 'in' needs a list, an object or a string")

        return in_value


def _single_arg(node: _Node) -> str | None:
    """``args.NAME`` → NAME (the path shape worth a fast path), else None."""
    if isinstance(node, _Path) and node.root == "args" and len(node.steps) == 1 and isinstance(node.steps[0], str):
        return node.steps[0]
    return None


def _pair(conj: bool, a: Evaluator, b: Evaluator) -> Evaluator:
    if conj:
        return lambda c: a(c) and b(c)
    return lambda c: a(c) or b(c)


def _fused_and(fuse: tuple[str, Callable[[Any, Any], bool], Any, str], rest: Evaluator) -> Evaluator:
    """``args.KEY <op> NUMBER and rest`` in one frame: policies test an amount first, and most calls stop there."""
    key, order, bound, text = fuse
    isfinite = math.isfinite

    def fused(c: CallView) -> Any:
        try:
            v = c.args[key]
        except (KeyError, TypeError):
            raise EvalError(f"{text} is missing") from None
        cls = v.__class__
        if not (cls is int or (cls is float and isfinite(v))):
            v = _number(v, text)
        return order(v, bound) and rest(c)

    return fused


def _op_text(op: str) -> str:
    return "not in" if op == "notin" else op


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled ``when`` expression; call :meth:`test` with a call view."""

    source: str
    paths: tuple[str, ...]
    """The paths it reads, in order (``args.amount``, ...)."""
    canonical: str
    """A normalised form of the syntax tree: two expressions with the same one are the same condition."""
    _fn: Evaluator
    guard: Guard | None = None
    """``(key, order, bound)`` when the expression starts with ``args.KEY <op> NUMBER and ...``: for a call
    whose ``args[KEY]`` is a finite int or float with ``not order(value, bound)`` it is false, with no error
    possible, so a policy can skip it without calling it. None when it has no such first test."""

    def test(self, call: CallView) -> bool:
        """True if the call satisfies it; raises :class:`EvalError` when it cannot be evaluated."""
        try:
            return bool(self._fn(call))
        except EvalError:
            raise
        except FOREIGN_ERRORS as exc:
            raise foreign_error(exc) from None


FOREIGN_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError)
"""Args from a Python caller may hold any object; a failure to compare one is an evaluation error."""


def foreign_error(exc: BaseException) -> EvalError:
    """An :class:`EvalError` for an exception raised by a value inside the args."""
    return EvalError(f"{type(exc).__name__}: {shorten(str(exc), 120)}")


def compile_expression(source: str) -> Expression:
    """Parse and compile ``source``; raises :class:`ExpressionError` with the column of the problem."""
    if not isinstance(source, str):
        raise ExpressionError(f"an expression is a string, got {safe_repr(source)}", 1)
    if len(source) > MAX_SOURCE:
        raise ExpressionError(f"longer than {MAX_SOURCE} characters", MAX_SOURCE)
    tree = _Parser(source).parse()
    compiler = _Compiler(source)
    fn = compiler.condition(tree)
    if not compiler.paths:
        raise ExpressionError("the expression reads no path (args..., tool, agent, labels...): it is a constant", 1)
    return Expression(
        source=source, paths=tuple(compiler.paths), canonical=repr(tree), _fn=fn, guard=compiler.guard_of(fn)
    )
