"""Source-level preparation of a Kubernetes CEL selector for the Rust CEL engine.

The engine (``common-expression-language``, the Rust ``cel`` crate) implements core CEL but
not three things Kubernetes selectors use, so a light token-level pass rewrites them into
equivalent core CEL plus helper functions registered by :mod:`drakit.allocator.cel.library`:

* ``x.?f`` and ``x[?k]`` (optional field/index selection) -> ``_dra_opt(x, "f")`` /
  ``_dra_opt(x, k)``, which return ``optional.of(x[k])`` or ``optional.none()``;
* ``cel.bind(v, init, body)`` -> ``[init].map(v, body)[0]`` (``init`` evaluated once, ``v``
  bound in ``body``: the same meaning);
* ``device.attributes[d]`` / ``device.attributes.d`` (and ``capacity``) ->
  ``_dra_domain(device.attributes, d)``, so that an unknown domain is an empty map, as in
  Kubernetes, while an unknown attribute id inside a domain stays a "no such key" error;
* ``s.matches(p)`` / ``matches(s, p)`` -> ``_dra_matches(s, p)`` (RE2, as Kubernetes; the
  engine's own ``matches`` uses another regex dialect);
* two-variable comprehensions (``x.all(i, v, p)``, ``exists``, ``existsOne``,
  ``transformList``, ``transformMap``, ``transformMapEntry``, with optional filter) ->
  one-variable comprehensions over ``_dra_keys(x)`` (list indices or map keys) with ``v``
  bound to ``x[i]``; ``transformMap``/``transformMapEntry`` build the map with
  ``_dra_to_map``/``_dra_merge_entries``.

It also computes a static worst-case cost (see :func:`estimate_cost`) so that no expression
can run unbounded: the Rust engine has no runtime cost limit or interrupt.

Positions in errors refer to the original expression (1-based line and column).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "PLAIN_STRING",
    "CELSyntaxError",
    "Folder",
    "Token",
    "estimate_cost",
    "is_risky",
    "rewrite",
    "tokenize",
]

# Largest iteration count any selector input can have: attribute lists hold <= 48 values,
# maps <= 32 entries, strings <= 64 characters (so split() yields <= 65 parts).
MAX_ITERABLE: Final = 65
COMPREHENSIONS: Final = frozenset(
    {
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "map",
        "filter",
        "transformList",
        "transformMap",
        "transformMapEntry",
        "sortBy",
    }
)

_TOKEN_RE: Final = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<str>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''
        |"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<optsel>\.\?)
  | (?P<optidx>\[\?)
  | (?P<punct>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)


class CELSyntaxError(ValueError):
    """The expression cannot be tokenized or rewritten; ``position`` is 0-based."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # str, num, ident, optsel, optidx, punct
    text: str
    pos: int


def tokenize(src: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(src):
        m = _TOKEN_RE.match(src, pos)
        if m is None:
            raise CELSyntaxError(f"unexpected character {src[pos]!r}", pos)
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append(Token(kind, m.group(), pos))
        pos = m.end()
    return tokens


def _match_close(tokens: list[Token], open_index: int) -> int:
    """Index of the bracket closing tokens[open_index] (``(``, ``[`` or ``{``)."""
    pairs = {"(": ")", "[": "]", "{": "}", "[?": "]"}
    depth = 0
    for i in range(open_index, len(tokens)):
        t = tokens[i].text
        if t in pairs:
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return i
    raise CELSyntaxError("unbalanced brackets", tokens[open_index].pos)


def _operand_start(tokens: list[Token], end: int) -> int:
    """Start index of the postfix chain (primary, .field, [index], (call)) ending at ``end``."""
    i = end
    while i >= 0:
        t = tokens[i]
        if t.text in (")", "]", "}"):
            depth = 0
            j = i
            while j >= 0:
                if tokens[j].text in (")", "]", "}"):
                    depth += 1
                elif tokens[j].text in ("(", "[", "{", "[?"):
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            i = j
            # a call or index applies to what precedes it
            if i > 0 and tokens[i].text in ("(", "[", "[?") and _is_operand_end(tokens[i - 1]):
                i -= 1
                continue
            return i
        if t.kind in ("ident", "str", "num", "gen"):
            if (i > 0 and tokens[i - 1].text == ".") or (i > 0 and tokens[i - 1].kind == "optsel"):
                i -= 2
                continue
            return i
        return i + 1
    return 0


def _is_operand_end(t: Token) -> bool:
    return t.kind in ("ident", "str", "num", "gen") or t.text in (")", "]", "}")


def _join(tokens: list[Token]) -> str:
    out: list[str] = []
    prev: Token | None = None
    for t in tokens:
        words = ("ident", "num", "gen", "str")
        if prev is not None and prev.kind in words and t.kind in words:
            out.append(" ")
        out.append(t.text)
        prev = t
    return "".join(out)


def _synthetic(kind: str, text: str, pos: int) -> Token:
    return Token(kind, text, pos)


def _spliced(pos: int, *parts: str | Token | list[Token]) -> list[Token]:
    """A token sequence at ``pos`` for a rewrite: a string part is split on spaces into
    synthetic tokens (an identifier, a number or punctuation, by the first character);
    tokens and token lists are taken as they are."""
    out: list[Token] = []
    for part in parts:
        if isinstance(part, Token):
            out.append(part)
        elif isinstance(part, list):
            out.extend(part)
        else:
            out.extend(_synthetic(_kind_of(text), text, pos) for text in part.split())
    return out


def _kind_of(text: str) -> str:
    if text[0].isalpha() or text[0] == "_":
        return "ident"
    return "num" if text[0].isdigit() else "punct"


def _rewrite_once(tokens: list[Token]) -> list[Token] | None:
    """Apply the first applicable rewrite; None when nothing is left to rewrite."""
    for i, t in enumerate(tokens):
        if t.kind == "optsel":
            if i + 1 >= len(tokens) or tokens[i + 1].kind != "ident":
                raise CELSyntaxError("expected a field name after '.?'", t.pos)
            start = _operand_start(tokens, i - 1)
            key = _synthetic("str", '"' + tokens[i + 1].text + '"', tokens[i + 1].pos)
            call = _call("_dra_opt", [tokens[start:i], [key]], t.pos)
            return tokens[:start] + call + tokens[i + 2 :]
        literal = _optional_literal(tokens, i)
        if literal is not None:
            return literal
        if t.kind == "optidx":
            close = _match_close(tokens, i)
            start = _operand_start(tokens, i - 1)
            call = _call("_dra_opt", [tokens[start:i], tokens[i + 1 : close]], t.pos)
            return tokens[:start] + call + tokens[close + 1 :]
        if (
            t.text == "cel"
            and i + 3 < len(tokens)
            and tokens[i + 1].text == "."
            and tokens[i + 2].text == "bind"
            and tokens[i + 3].text == "("
            and (i == 0 or tokens[i - 1].text != ".")
        ):
            close = _match_close(tokens, i + 3)
            args = _split_args(tokens, i + 3, close)
            if len(args) != 3 or len(args[0]) != 1 or args[0][0].kind != "ident":
                raise CELSyntaxError("cel.bind needs (variable, init, expression)", t.pos)
            # ([INIT].map(VAR, EXPR)[0])
            wrapped = _spliced(
                t.pos, "( [", args[1], "] . map (", args[0][0], ",", args[2], ") [ 0 ] )"
            )
            return [*tokens[:i], *wrapped, *tokens[close + 1 :]]
        for rewrite_at in (_domain_access, _matches_call, _two_variable, _sort_by):
            rewritten = rewrite_at(tokens, i)
            if rewritten is not None:
                return rewritten
    return None


def _optional_literal(tokens: list[Token], i: int) -> list[Token] | None:
    """``[?a, b]`` -> ``_dra_present([a, optional.of(b)])`` and ``{?k: a, l: b}`` ->
    ``_dra_present_map([[k, a], [l, optional.of(b)]])``: optional entries of aggregate
    literals (included only when the optional has a value)."""
    t = tokens[i]
    if t.text not in ("[?", "[", "{") or (i > 0 and _is_operand_end(tokens[i - 1])):
        return None
    close = _match_close(tokens, i)
    args = _split_args(tokens, i, close)
    if t.text == "[?" and args:
        args[0] = [Token("punct", "?", t.pos), *args[0]]
    if not any(a and a[0].text == "?" for a in args):
        return None
    parts: list[Part] = []
    for k, arg in enumerate(args):
        if k:
            parts.append(", ")
        optional = arg[0].text == "?"
        body = arg[1:] if optional else arg
        if t.text == "{":
            colon = next(j for j, x in enumerate(body) if x.text == ":")
            key, value = body[:colon], body[colon + 1 :]
            parts += ["[", key, ", ", *_maybe_wrap(value, optional), "]"]
        else:
            parts += _maybe_wrap(body, optional)
    helper = "_dra_present_map" if t.text == "{" else "_dra_present"
    built = _build([f"{helper}([", *parts, "])"], t.pos)
    return [*tokens[:i], *built, *tokens[close + 1 :]]


def _maybe_wrap(expr: list[Token], optional: bool) -> list[Part]:
    return [expr] if optional else ["optional.of(", expr, ")"]


def _sort_by(tokens: list[Token], i: int) -> list[Token] | None:
    """``x.sortBy(v, key)`` -> ``_dra_sort_by(x, x.map(v, key))`` with ``x`` bound once."""
    t = tokens[i]
    if not (
        t.text == "."
        and i + 2 < len(tokens)
        and tokens[i + 1].text == "sortBy"
        and tokens[i + 1].kind == "ident"
        and tokens[i + 2].text == "("
    ):
        return None
    close = _match_close(tokens, i + 2)
    args = _split_args(tokens, i + 2, close)
    if len(args) != 2 or len(args[0]) != 1 or args[0][0].kind != "ident":
        raise CELSyntaxError("sortBy needs (variable, key expression)", t.pos)
    start = _operand_start(tokens, i - 1)
    x = f"_dra_s{t.pos}"
    parts: list[Part] = ["([", tokens[start:i], f"].map({x}, _dra_sort_by({x}, {x}.map(",
                         args[0], ", ", args[1], ")))[0])"]  # fmt: skip
    return [*tokens[:start], *_build(parts, t.pos), *tokens[close + 1 :]]


def _matches_call(tokens: list[Token], i: int) -> list[Token] | None:
    """``s.matches(p)`` -> ``_dra_matches(s, p)``; ``matches(s, p)`` -> ``_dra_matches(s, p)``;
    ``string(x)`` -> ``_dra_string(x)`` (the engine's own has no IP/CIDR overloads)."""
    t = tokens[i]
    if (
        t.kind == "ident"
        and t.text == "string"
        and i + 1 < len(tokens)
        and tokens[i + 1].text == "("
        and (i == 0 or tokens[i - 1].text != ".")
    ):
        return [*tokens[:i], Token("ident", "_dra_string", t.pos), *tokens[i + 1 :]]
    if t.kind != "ident" or t.text != "matches" or i + 1 >= len(tokens):
        return None
    if tokens[i + 1].text != "(":
        return None
    name = Token("ident", "_dra_matches", t.pos)
    if i >= 1 and tokens[i - 1].text == ".":
        close = _match_close(tokens, i + 1)
        start = _operand_start(tokens, i - 2)
        call = _call("_dra_matches", [tokens[start : i - 1], tokens[i + 2 : close]], t.pos)
        return tokens[:start] + call + tokens[close + 1 :]
    return [*tokens[:i], name, *tokens[i + 1 :]]


TWO_VARIABLE_MACROS: Final = frozenset(
    {"all", "exists", "existsOne", "exists_one", "transformList", "transformMap",
     "transformMapEntry"}
)  # fmt: skip


def _two_variable(tokens: list[Token], i: int) -> list[Token] | None:
    """Rewrite ``x.m(i, v, ...)`` for a two-variable macro ``m`` (see the module doc)."""
    t = tokens[i]
    if not (
        t.text == "."
        and i + 2 < len(tokens)
        and tokens[i + 1].text in TWO_VARIABLE_MACROS
        and tokens[i + 2].text == "("
    ):
        return None
    macro = tokens[i + 1].text
    close = _match_close(tokens, i + 2)
    args = _split_args(tokens, i + 2, close)
    is_transform = macro.startswith("transform")
    if len(args) not in ((3, 4) if is_transform else (3,)):
        return None
    if not all(len(a) == 1 and a[0].kind == "ident" for a in args[:2]):
        raise CELSyntaxError(f"{macro}: the first two arguments must be identifiers", t.pos)
    start = _operand_start(tokens, i - 1)
    p = t.pos
    x = f"_dra_x{p}"
    body = _two_variable_body(macro, x, args, p)
    # bind the receiver once: ([x].map(target, body)[0])
    bound = _build(["([", tokens[start:i], f"].map({x}, ", *body, ")[0])"], p)
    return [*tokens[:start], *bound, *tokens[close + 1 :]]


Part = str | list[Token]


def _two_variable_body(macro: str, x: str, args: list[list[Token]], p: int) -> list[Part]:
    index, value = args[0][0].text, args[1][0].text

    def with_value(expr: list[Token]) -> list[Part]:
        return [f"[{x}[{index}]].map({value}, ", expr, ")[0]"]

    keys: list[Part] = [f"_dra_keys({x})"]
    if macro in ("all", "exists", "existsOne", "exists_one"):
        name = "exists_one" if macro == "existsOne" else macro
        return [*keys, f".{name}({index}, ", *with_value(args[2]), ")"]
    if len(args) == 4:
        keys = [*keys, f".filter({index}, ", *with_value(args[2]), ")"]
    result = with_value(args[-1])
    if macro == "transformList":
        return [*keys, f".map({index}, ", *result, ")"]
    if macro == "transformMap":
        ks = f"_dra_k{p}"
        return ["[", *keys, f"].map({ks}, _dra_to_map({ks}, {ks}.map({index}, ", *result,
                ")))[0]"]  # fmt: skip
    return ["_dra_merge_entries(", *keys, f".map({index}, ", *result, "))"]


def _build(parts: list[Part], pos: int) -> list[Token]:
    """Generated text (tokenized, placed at ``pos``) around kept user tokens."""
    out: list[Token] = []
    for part in parts:
        if isinstance(part, str):
            out.extend(Token(t.kind, t.text, pos) for t in tokenize(part))
        else:
            out.extend(part)
    return out


def _domain_access(tokens: list[Token], i: int) -> list[Token] | None:
    t = tokens[i]
    if not (
        t.text == "device"
        and t.kind == "ident"
        and (i == 0 or tokens[i - 1].text != ".")
        and i + 3 < len(tokens)
        and tokens[i + 1].text == "."
        and tokens[i + 2].text in ("attributes", "capacity")
    ):
        return None
    nxt = tokens[i + 3]
    p = t.pos
    # The produced 'device' tokens get kind "gen" so that this rule never matches them again.
    base = [Token("gen", "device", p), tokens[i + 1], tokens[i + 2]]
    if nxt.text == "[":
        close = _match_close(tokens, i + 3)
        key = tokens[i + 4 : close]
        if len(key) == 1 and key[0].kind == "str":
            return tokens[:i] + _guarded_lookup(base, key[0], p) + tokens[close + 1 :]
        call = _call("_dra_domain", [base, key], p)
        return tokens[:i] + call + tokens[close + 1 :]
    is_method = i + 5 < len(tokens) and tokens[i + 5].text == "("  # device.attributes.size()
    if nxt.text == "." and i + 4 < len(tokens) and tokens[i + 4].kind == "ident" and not is_method:
        # has(device.attributes.dom) tests the domain itself: leave it to the engine
        inside_has = (
            i >= 2
            and tokens[i - 1].text == "("
            and tokens[i - 2].text == "has"
            and i + 5 < len(tokens)
            and tokens[i + 5].text == ")"
        )
        if inside_has:
            return None
        key_token = _synthetic("str", '"' + tokens[i + 4].text + '"', tokens[i + 4].pos)
        return tokens[:i] + _guarded_lookup(base, key_token, p) + tokens[i + 5 :]
    return None


def _guarded_lookup(base: list[Token], key: Token, p: int) -> list[Token]:
    """``(KEY in device.attributes ? device.attributes[KEY] : {})``: pure CEL, so no Python
    callback runs for the common literal-domain case."""
    return _spliced(p, "(", key, "in", base, "?", base, "[", key, "] : { } )")


def _call(name: str, args: list[list[Token]], pos: int) -> list[Token]:
    out = [_synthetic("ident", name, pos), _synthetic("punct", "(", pos)]
    for k, arg in enumerate(args):
        if k:
            out.append(_synthetic("punct", ",", pos))
        out.extend(arg)
    out.append(_synthetic("punct", ")", pos))
    return out


def _split_args(tokens: list[Token], open_index: int, close: int) -> list[list[Token]]:
    args: list[list[Token]] = []
    current: list[Token] = []
    depth = 0
    for t in tokens[open_index + 1 : close]:
        if t.text in ("(", "[", "{", "[?"):
            depth += 1
        elif t.text in (")", "]", "}"):
            depth -= 1
        if t.text == "," and depth == 0:
            args.append(current)
            current = []
        else:
            current.append(t)
    if current:
        args.append(current)
    return args


# A constant folder: the CEL text of ``name("literal")``'s value, or None to keep the call.
Folder = Callable[[str], str | None]
#: A one-line string literal without escapes or prefixes: its text between the quotes is
#: its value.
PLAIN_STRING: Final = re.compile(r"""^(?:"[^"\\\n]*"|'[^'\\\n]*')$""")


def rewrite(
    src: str, *, count_iterations: bool = False, fold: Mapping[str, Folder] | None = None
) -> str:
    """Core-CEL text equivalent to ``src`` (see the module docstring).

    With ``count_iterations``, every comprehension's range goes through ``_dra_iter``, which
    charges one cost unit per element (:mod:`drakit.allocator.cel.budget`) before the loop runs.
    ``fold`` maps global function names to folders: a call ``name("literal")`` (a plain
    string literal) is replaced by the folder's text when it returns one, so that a
    constant such as ``quantity("1Mi")`` costs no callback into Python per evaluation.
    """
    tokens = tokenize(src)
    # Bound the number of passes: each pass removes one construct.
    for _ in range(len(tokens) + 1):
        out = _rewrite_once(tokens)
        if out is None:
            break
        tokens = out
    else:
        raise CELSyntaxError("expression too complex to rewrite", 0)
    if count_iterations:
        tokens = _count_iterations(tokens)
    if fold:
        tokens = _fold_calls(tokens, fold)
    return _join(tokens)


def _fold_calls(tokens: list[Token], fold: Mapping[str, Folder]) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        folder = fold.get(t.text) if t.kind == "ident" else None
        if (
            folder is not None
            and (not out or out[-1].text not in (".", ".?"))
            and i + 3 < len(tokens)
            and tokens[i + 1].text == "("
            and tokens[i + 2].kind == "str"
            and PLAIN_STRING.match(tokens[i + 2].text)
            and tokens[i + 3].text == ")"
        ):
            text = folder(tokens[i + 2].text[1:-1])
            if text is not None:
                out.extend(Token(k.kind, k.text, t.pos) for k in tokenize(f"({text})"))
                i += 4
                continue
        out.append(t)
        i += 1
    return out


def _count_iterations(tokens: list[Token]) -> list[Token]:
    """``x.all(v, p)`` -> ``_dra_iter(x).all(v, p)`` for every comprehension."""
    while True:
        for i in range(1, len(tokens) - 1):
            name = tokens[i]
            if (
                name.kind == "ident"
                and name.text in COMPREHENSIONS
                and tokens[i - 1].text == "."
                and tokens[i + 1].text == "("
            ):
                start = _operand_start(tokens, i - 2)
                done = Token("gen", name.text, name.pos)  # never wrapped twice
                wrapped = _call("_dra_iter", [tokens[start : i - 1]], name.pos)
                tokens = [*tokens[:start], *wrapped, tokens[i - 1], done, *tokens[i + 1 :]]
                break
        else:
            return tokens


# Functions and macros whose result can be much larger than their input, or that create
# values from nothing: with them an expression's work is no longer bounded by its length
# times the size of the device data.
GROWTH: Final = frozenset(
    {"bind", "range", "split", "join", "replace", "format", "quote", "flatten", "findAll",
     "sort", "distinct", "map", "filter", "transformList", "transformMap",
     "transformMapEntry", "sortBy"}
)  # fmt: skip


def is_risky(src: str, limit: int) -> bool:
    """Whether evaluating ``src`` needs the guarded child (:mod:`drakit.allocator.cel.sandbox`).

    Safe (evaluated in-process): expressions that use no :data:`GROWTH` function or macro and
    whose :func:`estimate_cost` is within ``limit``. Their work is bounded by the expression's
    length times the device data's size per comprehension level; string ``+`` without
    variables only adds up lengths written in the expression or read from the device.
    """
    tokens = tokenize(src)
    if any(t.kind == "ident" and t.text in GROWTH for t in tokens):
        return True
    return _cost(tokens) > limit


def estimate_cost(src: str) -> int:
    """A worst-case bound on evaluation steps: tokens x MAX_ITERABLE ** nesting.

    Every comprehension (``all``, ``exists``, ``map``, ...) iterates over at most
    :data:`MAX_ITERABLE` elements for device data; nesting multiplies. The result
    overestimates the Kubernetes runtime cost, so an expression accepted here cannot
    exceed the Kubernetes per-evaluation limit by more than the same factor.
    """
    return _cost(tokenize(src))


def _cost(tokens: list[Token]) -> int:
    depth = 0
    max_depth = 0
    stack: list[bool] = []  # per open bracket: is it a comprehension call
    for i, t in enumerate(tokens):
        if t.text in ("(", "[", "{", "[?"):
            is_comp = (
                t.text == "("
                and i >= 2
                and tokens[i - 1].text in COMPREHENSIONS
                and tokens[i - 2].text == "."
            )
            stack.append(is_comp)
            if is_comp:
                depth += 1
                max_depth = max(max_depth, depth)
        elif t.text in (")", "]", "}") and stack and stack.pop():
            depth -= 1
    # literal lists in the expression can be longer than any device list
    return int(len(tokens) * max(MAX_ITERABLE, len(tokens)) ** max_depth)
