"""OpenSCENARIO parameter references and expressions: `$name` and `${...}` (1.1+).

An attribute value that starts with `$` names a parameter (`$Speed` takes Speed's value as written);
one written `${expression}` is evaluated: numbers, `$name` references, `true` / `false`, the
arithmetic operators `+ - * / %` (and unary `-`), comparisons `== != < <= > >=`, `not`, `and`,
`or`, parentheses and the functions `round`, `floor`, `ceil`, `sqrt`, `pow(x, y)`. The grammar and
precedence are the standard's (1.1, "Expressions"); booleans take part in arithmetic as 1 and 0,
as esmini evaluates them. Evaluation is a small recursive-descent parser over a bounded string:
nothing of the file is ever executed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

MAX_EXPRESSION_CHARS = 1024
MAX_NESTING = 32

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|(?P<par>\$[A-Za-z_][\w.]*)"
                    r"|(?P<name>[A-Za-z_]\w*)|(?P<op>==|!=|<=|>=|[-+*/%()<>,]))")  # fmt: skip
_FUNCTIONS: dict[str, tuple[int, Callable[..., float]]] = {
    "round": (1, lambda x: float(math.floor(x + 0.5))),
    "floor": (1, lambda x: float(math.floor(x))),
    "ceil": (1, lambda x: float(math.ceil(x))),
    "sqrt": (1, math.sqrt),
    "pow": (2, math.pow),
}


class ExpressionError(ValueError):
    """A malformed expression, an unknown parameter or a value out of a function's domain."""


class _Parser:
    """Recursive descent over the tokens of one expression (precedence low to high: or, and, not,
    comparison, + -, * / %, unary -, primary)."""

    def __init__(self, text: str, lookup: Callable[[str], str]) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise ExpressionError(f"unexpected character {text[pos]!r} at {pos}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.depth = 0
        self.lookup = lookup

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        if self.take()[1] != value:
            raise ExpressionError(f"expected {value!r}")

    def parse(self) -> float:
        value = self.or_()
        if self.peek()[0] != "end":
            raise ExpressionError(f"unexpected {self.peek()[1]!r}")
        return value

    def or_(self) -> float:
        value = self.and_()
        while self.peek() == ("name", "or"):
            self.take()
            right = self.and_()
            value = float(bool(value) or bool(right))
        return value

    def and_(self) -> float:
        value = self.not_()
        while self.peek() == ("name", "and"):
            self.take()
            right = self.not_()
            value = float(bool(value) and bool(right))
        return value

    def not_(self) -> float:
        if self.peek() == ("name", "not"):
            self.take()
            return float(not self.not_())
        return self.compare()

    def compare(self) -> float:
        value = self.sum_()
        ops = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
               ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}  # fmt: skip
        while self.peek()[1] in ops:
            op = self.take()[1]
            value = float(ops[op](value, self.sum_()))
        return value

    def sum_(self) -> float:
        value = self.product()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            right = self.product()
            value = value + right if op == "+" else value - right
        return value

    def product(self) -> float:
        value = self.unary()
        while self.peek()[1] in ("*", "/", "%"):
            op = self.take()[1]
            right = self.unary()
            if op != "*" and right == 0:
                raise ExpressionError("division by zero")
            value = value * right if op == "*" else value / right if op == "/" else math.fmod(value, right)
        return value

    def unary(self) -> float:
        if self.peek()[1] == "-":
            self.take()
            return -self.unary()
        return self.primary()

    def primary(self) -> float:
        kind, text = self.take()
        if kind == "num":
            return float(text)
        if kind == "par":
            return to_number(self.lookup(text[1:]), text)
        if kind == "name" and text in ("true", "false"):
            return float(text == "true")
        if kind == "name" and text in _FUNCTIONS:
            return self.call(text)
        if text == "(":
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise ExpressionError(f"nested deeper than {MAX_NESTING}")
            value = self.or_()
            self.expect(")")
            self.depth -= 1
            return value
        raise ExpressionError(f"unexpected {text!r}" if text else "unexpected end")

    def call(self, name: str) -> float:
        arity, fn = _FUNCTIONS[name]
        self.expect("(")
        args = [self.or_()]
        while self.peek()[1] == ",":
            self.take()
            args.append(self.or_())
        self.expect(")")
        if len(args) != arity:
            raise ExpressionError(f"{name} takes {arity} argument(s), got {len(args)}")
        try:
            out = float(fn(*args))
        except (ValueError, OverflowError):
            raise ExpressionError(f"{name}{tuple(args)} is undefined") from None
        if not math.isfinite(out):
            raise ExpressionError(f"{name}{tuple(args)} is not finite")
        return out


def to_number(value: str, what: str) -> float:
    """A parameter's value as a number (booleans as 1 / 0)."""
    text = value.strip()
    if text in ("true", "false"):
        return float(text == "true")
    try:
        out = float(text)
    except ValueError:
        raise ExpressionError(f"{what} = {value[:80]!r} is not a number") from None
    if not math.isfinite(out):
        raise ExpressionError(f"{what} = {value[:80]!r} is not finite")
    return out


def evaluate(expression: str, lookup: Callable[[str], str]) -> float:
    """Evaluate an expression (the text inside `${...}`).

    Args:
        expression: the expression.
        lookup: a parameter's value (as written) by its name without `$`; raises KeyError when unknown.

    Returns:
        The value (booleans as 1.0 / 0.0).

    Raises:
        ExpressionError: malformed, unknown parameter, or undefined value.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"longer than {MAX_EXPRESSION_CHARS} characters")

    def known(name: str) -> str:
        try:
            return lookup(name)
        except KeyError:
            raise ExpressionError(f"unknown parameter ${name}") from None

    return _Parser(expression, known).parse()


def format_number(value: float) -> str:
    """An expression's value as a parameter string: integers without a fraction, else repr."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def resolve(value: str, lookup: Callable[[str], str]) -> str:
    """An attribute's value with its parameter reference or expression resolved.

    Args:
        value: the attribute as written.
        lookup: a parameter's value by name (KeyError when unknown).

    Returns:
        The resolved text (a plain value is returned unchanged).

    Raises:
        ExpressionError: an unknown parameter or a bad expression.
    """
    if not value.startswith("$") or len(value) < 2:
        return value
    if value.startswith("${"):
        if not value.endswith("}"):
            raise ExpressionError(f"expression {value[:80]!r} has no closing '}}'")
        return format_number(evaluate(value[2:-1], lookup))
    try:
        return lookup(value[1:])
    except KeyError:
        raise ExpressionError(f"unknown parameter {value[:80]}") from None
