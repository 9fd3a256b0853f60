"""``-ot`` patterns read as llama.cpp reads them: ``std::regex`` (ECMAScript, libstdc++) on the bytes of a name.

llama.cpp compiles each ``--override-tensor`` pattern with ``std::regex``
(ECMAScript grammar) and tests it with ``std::regex_search`` against every
tensor name (``src/llama-model.cpp``). Layerdeck matches with the ``regex``
package, for its ``timeout=``: a pattern with catastrophic backtracking ends in
a typed error instead of hanging. The two dialects differ, so
:func:`translate` rewrites an ECMAScript pattern into an equivalent ``regex``
bytes pattern, or refuses it (:class:`PatternError`) where llama.cpp refuses
it, where the dialects cannot be made to agree, or where it is too large:

- bytes, like ``std::regex`` on ``char``: a non-ASCII letter is several bytes
  and a quantifier after it repeats its last byte, as in llama.cpp;
- ``.`` is any byte but ``\\n``/``\\r``; ``$`` only the end of the name;
  ``\\d \\w \\s \\b`` are ASCII (the C locale);
- ``[]`` (matches nothing in ECMAScript) and ``[^]`` (any character) are
  refused, not read Python's way; POSIX ``[:alpha:]`` classes are kept,
  ``[.x.]``/``[=x=]`` refused;
- ``(?:...)``, ``(?=...)``, ``(?!...)`` are kept; every other ``(?`` form
  (lookbehind, named groups, inline flags, atomic groups) is a
  ``std::regex`` error;
- a quantifier right after another (``a**``, ``a++``, ``a{2}{3}``) repeats
  the quantified atom, as libstdc++ reads it (``(?:a*)*``), never Python's
  possessive quantifier; a quantifier after an assertion is refused;
- an escaped letter ECMAScript does not define (``\\A``, ``\\Z``, ``\\p``)
  is refused (libstdc++ reads it as the letter, other standard libraries
  refuse it); other escaped punctuation is the character;
- the automaton ``std::regex`` would build is estimated and refused above
  libstdc++'s ``_GLIBCXX_REGEX_STATE_LIMIT`` (100000 states), where
  llama.cpp throws ``regex_error(error_space)``; so are groups nested more
  than :data:`MAX_DEPTH` deep (its matcher recurses).

A pattern of literal characters and groups of literal alternatives (what
Layerdeck itself writes) is searched as a set of literals, with no regular
expression compiled (:func:`compile_pattern`): such a pattern finds a name
exactly where one of them is in it, in both dialects.

``tests/command/test_ot_patterns.py`` compiles the ``std::regex`` +
``regex_search`` call llama.cpp makes and compares it with :func:`compile_pattern`
on generated patterns and tensor names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import regex

from ..errors import EstimateError

__all__ = ["PatternError", "Compiled", "STATE_LIMIT", "MAX_DEPTH", "translate", "compile_pattern", "name_bytes"]

#: libstdc++'s ``_GLIBCXX_REGEX_STATE_LIMIT``: a larger automaton is ``regex_error(error_space)``.
STATE_LIMIT = 100_000
#: Deepest group nesting accepted (``std::regex``'s executor recurses per group).
MAX_DEPTH = 100
#: A :attr:`Compiled.simple` pattern has at most this many loops (``*``, ``+``, ``{n,}``, ``{n,m}``).
SIMPLE_LOOPS = 2

#: The POSIX classes of ``[[:name:]]`` in the C locale, as byte ranges (so Python's ``re`` reads them too).
_POSIX = {
    b"alnum": rb"0-9A-Za-z",
    b"alpha": rb"A-Za-z",
    b"blank": rb"\x09\x20",
    b"cntrl": rb"\x00-\x1f\x7f",
    b"digit": rb"0-9",
    b"graph": rb"\x21-\x7e",
    b"lower": rb"a-z",
    b"print": rb"\x20-\x7e",
    b"punct": rb"\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e",
    b"space": rb"\x09-\x0d\x20",
    b"upper": rb"A-Z",
    b"xdigit": rb"0-9A-Fa-f",
}
_SHORTHAND = frozenset(b"dDwWsS")
_CONTROL = {ord("f"): 0x0C, ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09, ord("v"): 0x0B}
_HEX = frozenset(b"0123456789abcdefABCDEF")
#: Bytes with a meaning of their own outside a class (``}`` and ``]`` alone are literals in ECMAScript).
_SPECIAL = frozenset(b"\\.[()|^$*+?{")
#: Escaped punctuation that is just the character.
_PUNCT = frozenset(b"!\"#%&',-/:;<=>@_`~.[](){}|^$*+?\\")
_DIGITS = frozenset(b"0123456789")


class PatternError(EstimateError, ValueError):
    """An ``-ot`` pattern llama.cpp's ``std::regex`` refuses, or that Layerdeck cannot read exactly as it does."""


def name_bytes(name: str) -> bytes:
    """A tensor name as ``std::regex`` on ``char`` sees it (its UTF-8 bytes)."""
    return name.encode("utf-8", "surrogatepass")


def _lit(b: int) -> bytes:
    """One literal byte in ``regex`` syntax: letters, digits, ``_`` and space as themselves, other ASCII
    punctuation after a backslash, anything else as ``\\xHH``."""
    return _LIT[b]


_LIT = [
    bytes([b])
    if chr(b).isascii() and (chr(b).isalnum() or b in b"_ ")
    else (b"\\" + bytes([b]) if 0x21 <= b <= 0x7E else b"\\x%02x" % b)
    for b in range(256)
]


#: A repeat bound or length that has no limit.
INF = 1 << 30
#: Tensor names are shorter than ``GGML_MAX_NAME`` (64) bytes: the longest match a loop can make.
NAME_BYTES = 64
#: A counted repeat of something that can match in several ways is refused above this many ways.
WAYS_LIMIT = 1 << 16
#: A whole pattern is refused above this many ways to match at one position (``.*`` five times is about 2**30).
PATTERN_WAYS_LIMIT = 1 << 32
_CAP = 1 << 80


@lru_cache(maxsize=4096)
def _byteset(text: bytes) -> frozenset[int]:
    """The bytes one translated atom (a literal, ``.``, ``\\d``, a class) matches."""
    rx = re.compile(text)
    return frozenset(b for b in range(256) if rx.fullmatch(bytes([b])))


@dataclass(frozen=True, slots=True)
class _Info:
    """What a piece of a pattern can match: its length range, the bytes a match starts with, and whether
    the same text can be matched in more than one way (where backtracking multiplies)."""

    lo: int = 0
    hi: int = 0
    first: frozenset[int] = frozenset()
    ambiguous: bool = False
    zero_width: bool = False
    ways: int = 1  # how many ways backtracking may try to match it at one position (an estimate, capped)

    @property
    def variable(self) -> bool:
        return self.lo != self.hi

    def then(self, b: _Info) -> _Info:
        return _Info(
            self.lo + b.lo,
            min(INF, self.hi + b.hi),
            self.first | (b.first if self.lo == 0 else frozenset()),
            self.ambiguous or b.ambiguous,
            ways=min(_CAP, self.ways * b.ways),
        )


_EMPTY = _Info()


def _alternatives(branches: list[_Info]) -> _Info:
    firsts = [b.first for b in branches]
    overlap = any(firsts[i] & firsts[j] for i in range(len(firsts)) for j in range(i))
    return _Info(
        min(b.lo for b in branches),
        max(b.hi for b in branches),
        frozenset().union(*firsts),
        overlap or sum(b.lo == 0 for b in branches) > 1 or any(b.ambiguous for b in branches),
        ways=min(_CAP, sum(b.ways for b in branches)),
    )


class _Frame:
    """One group level: its branches (``|``), its pieces, the last atom, and the estimated automaton size."""

    def __init__(self, head: bytes, assertion: bool, group: int = 0):
        self.head = head
        self.assertion = assertion  # (?=...) / (?!...): not quantifiable
        self.group = group  # its capture group number (0: not a capture group)
        self.pieces: list[bytes] = []
        self.last: int | None = None  # index in pieces where the last atom starts
        self.kind: str | None = None  # None (nothing to repeat), "atom", "quantified", "assertion"
        self.last_is_group = False
        self.branches: list[_Info] = []  # the branches before the current one
        self.seq = _EMPTY  # the current branch before the last atom
        self.info: _Info | None = None  # the last atom
        self.weight = 0  # states before the last atom
        self.last_weight = 0

    def current(self) -> _Info:
        return self.seq.then(self.info) if self.info is not None else self.seq

    def total(self) -> _Info:
        return _alternatives([*self.branches, self.current()]) if self.branches else self.current()


class _Translator:
    def __init__(self, pattern: str):
        self.pattern = pattern
        self.p = name_bytes(pattern)
        self.i = 0
        self.groups = 0
        self.stack = [_Frame(b"", False)]
        self.loops = 0  # quantifiers that repeat without a small fixed count
        self.nested = False  # a loop over a group or over a quantified atom: backtracking may explode
        self.backref = False  # a back-reference (or \B): only the regex package reads it like std::regex
        self.required: list[tuple[int, bytes]] = []  # (piece index, bytes) of the top level's literal runs
        self.top_alternation = False

    def fail(self, why: str) -> PatternError:
        return PatternError(f"the override pattern {self.pattern!r} {why}")

    # ---- emitting
    def atom(
        self, text: bytes, weight: int = 1, kind: str = "atom", group: bool = False, info: _Info | None = None
    ) -> None:
        f = self.stack[-1]
        f.weight += f.last_weight
        if f.info is not None:
            f.seq = f.seq.then(f.info)
        if info is None:
            info = _Info(zero_width=True) if kind == "assertion" else _Info(1, 1, _byteset(text))
        f.last, f.kind, f.last_weight, f.last_is_group, f.info = len(f.pieces), kind, weight, group, info
        f.pieces.append(text)
        self.check_size()

    def check_size(self) -> None:
        total = sum(f.weight + f.last_weight for f in self.stack)
        if total > STATE_LIMIT:
            raise self.fail(
                f"is too large for llama.cpp: std::regex would need more than {STATE_LIMIT} states "
                "(its limit; llama.cpp stops with regex_error). Use fewer repeats or a shorter pattern."
            )

    def quantify(self, q: bytes, lo: int, hi: int, factor: int, extra: int) -> None:
        """Repeat the last atom ``lo`` to ``hi`` times (``hi`` :data:`INF`: no limit)."""
        f = self.stack[-1]
        if f.kind is None or f.last is None or f.info is None:
            raise self.fail(f"has {q.decode()!r} with nothing to repeat (std::regex refuses it).")
        if len(self.stack) == 1 and self.required and self.required[-1][0] == f.last:
            self.required.pop()  # a repeated literal is not required (a?, a{0})
        if f.kind == "assertion":
            raise self.fail(f"repeats an assertion (^, $, \\b or a lookahead) with {q.decode()!r}; remove it.")
        a = f.info
        if hi > 1 and (a.variable or a.ambiguous):
            if hi >= INF:
                raise self.fail(
                    f"repeats ({q.decode()}) something that can match in more than one way (like (.+)+, (a|ab)* "
                    "or a**): llama.cpp's std::regex backtracks exponentially on it and llama-server would hang "
                    "loading the model. Simplify it, e.g. (.+)+ is .+"
                )
            choices = (min(a.hi, NAME_BYTES) - min(a.lo, NAME_BYTES) + 1) * (2 if a.ambiguous else 1)
            if choices > 1 and hi * math.log2(choices) > math.log2(WAYS_LIMIT):
                raise self.fail(
                    f"repeats ({q.decode()}) something that can match in {choices} ways: std::regex would try "
                    f"about {choices}^{hi} ways on a name and llama-server would hang loading the model; simplify it."
                )
        if hi > 1 and (f.kind == "quantified" or f.last_is_group):
            self.nested = True
        self.loops += hi > lo and hi > 1
        if f.kind == "quantified":  # libstdc++ repeats the quantified atom: a{2}{3} is (?:a{2}){3}
            f.pieces[f.last :] = [b"(?:" + b"".join(f.pieces[f.last :]) + b")"]
            f.last_is_group = True
        f.pieces.append(q)
        if self.i < len(self.p) and self.p[self.i] == ord("?"):
            f.pieces.append(b"?")  # lazy
            self.i += 1
        f.kind = "quantified"
        counts = min(hi, NAME_BYTES) - min(lo, NAME_BYTES) + 1
        if a.variable or a.ambiguous:
            choices = (min(a.hi, NAME_BYTES) - min(a.lo, NAME_BYTES) + 1) * (2 if a.ambiguous else 1)
            ways = min(_CAP, counts * choices ** min(hi, 80) * a.ways ** min(hi, 2))
        else:
            ways = min(_CAP, counts * a.ways)
        f.info = _Info(
            lo * a.lo,
            INF if hi >= INF and a.hi else min(INF, hi * a.hi),
            a.first if hi else frozenset(),
            a.ambiguous or (hi > 1 and a.variable),
            ways=ways,
        )
        f.last_weight = f.last_weight * factor + extra
        self.check_size()

    # ---- reading
    def escape(self, in_class: bool) -> tuple[bytes, int | None]:
        """The escape after a backslash at ``i`` (already consumed): (regex text, its byte, or None for a class like ``\\d``)."""
        p = self.p
        if self.i >= len(p):
            raise self.fail("ends with a backslash (std::regex refuses it).")
        e = p[self.i]
        self.i += 1
        if e in _SHORTHAND:
            return b"\\" + bytes([e]), None
        if e in _CONTROL:
            return _lit(_CONTROL[e]), _CONTROL[e]
        if e == ord("b") and in_class:
            return _lit(0x08), 0x08
        if e == ord("0"):
            if self.i < len(p) and p[self.i] in _DIGITS:
                raise self.fail("has \\0 followed by a digit, which std::regex and Python read differently.")
            return _lit(0), 0
        if e == ord("c"):  # libstdc++ does not read \cX as a control character (it matches X)
            raise self.fail("has \\c, which standard libraries read differently; write the character as \\xHH.")
        if e in (ord("x"), ord("u")):
            n = 2 if e == ord("x") else 4
            digits = p[self.i : self.i + n]
            if len(digits) != n or any(d not in _HEX for d in digits):
                raise self.fail(f"has \\{chr(e)} without {n} hex digits (std::regex refuses it).")
            self.i += n
            value = int(digits, 16)
            if value > 0x7F and e == ord("u"):
                raise self.fail("has a \\u escape above 007F: llama.cpp matches bytes; write the character itself.")
            return _lit(value), value
        if 0x41 <= e <= 0x5A or 0x61 <= e <= 0x7A:
            raise self.fail(f"has \\{chr(e)}, which is not an ECMAScript escape; write {chr(e)} without the backslash.")
        return _lit(e), e

    def bracket(self) -> bytes:
        """A ``[...]`` class starting after the ``[`` at ``i - 1``."""
        p = self.p
        out = [b"["]
        if self.i < len(p) and p[self.i] == ord("^"):
            out.append(b"^")
            self.i += 1
        if self.i < len(p) and p[self.i] == ord("]"):
            raise self.fail(
                "has an empty class [] or [^] (std::regex: nothing / any character; Python: a literal ]); "
                "write \\] for a bracket."
            )
        prev: int | None = None  # the last single byte, which a '-' may turn into a range start
        while True:
            if self.i >= len(p):
                raise self.fail("has a [ without its closing ] (std::regex refuses it).")
            c = p[self.i]
            self.i += 1
            if c == ord("]"):
                break
            if c == ord("-") and prev is not None and self.i < len(p) and p[self.i] != ord("]"):
                hi = self.class_byte()
                if hi is None:
                    raise self.fail("has a range that ends in a class (like a-\\d); std::regex refuses it.")
                if hi < prev:
                    raise self.fail(
                        f"has the range {chr(prev)}-{chr(hi)}, which runs backwards (std::regex refuses it)."
                    )
                out.append(b"-" + _lit(hi))
                prev = None
                continue
            if c == ord("[") and self.i < len(p) and p[self.i] in b":.=":
                kind = p[self.i]
                end = p.find(bytes([kind, ord("]")]), self.i + 1)
                if end < 0:
                    raise self.fail("has an unterminated [: :] class.")
                name = p[self.i + 1 : end]
                if kind != ord(":") or name not in _POSIX:
                    raise self.fail(
                        f"has [{chr(kind)}{name.decode(errors='replace')}{chr(kind)}]: Layerdeck reads only the POSIX "
                        f"classes [:{':], [:'.join(sorted(n.decode() for n in _POSIX))}:]."
                    )
                self.i = end + 2
                out.append(_POSIX[name])
                prev = None
                continue
            if c == ord("\\"):
                text, byte = self.escape(in_class=True)
                out.append(text)
                prev = byte
                if (
                    byte is None
                    and self.i < len(p)
                    and p[self.i] == ord("-")
                    and self.i + 1 < len(p)
                    and p[self.i + 1] != ord("]")
                ):
                    raise self.fail("has a range that starts with a class (like \\d-z); std::regex refuses it.")
                continue
            out.append(_lit(c))
            prev = c
        out.append(b"]")
        return b"".join(out)

    def class_byte(self) -> int | None:
        """The byte that ends a range (escaped or plain), or None for a class shorthand."""
        p = self.p
        c = p[self.i]
        self.i += 1
        if c == ord("\\"):
            return self.escape(in_class=True)[1]
        if c == ord("[") and self.i < len(p) and p[self.i] in b":.=":
            raise self.fail("has a range that ends in a [: :] class; std::regex refuses it.")
        return c

    def braces(self) -> tuple[bytes, int, int]:
        """A ``{n}``, ``{n,}`` or ``{n,m}`` quantifier starting after the ``{`` at ``i - 1``: (text, lo, hi)."""
        p = self.p
        j = self.i
        while j < len(p) and p[j] in _DIGITS:
            j += 1
        lo = p[self.i : j]
        hi: bytes | None = lo
        if j < len(p) and p[j] == ord(","):
            k = j + 1
            while k < len(p) and p[k] in _DIGITS:
                k += 1
            hi = p[j + 1 : k] or None
            j = k
        if not lo or j >= len(p) or p[j] != ord("}"):
            raise self.fail("has a { that is not a repeat count {n}, {n,} or {n,m} (std::regex refuses it); write \\{.")
        self.i = j + 1
        n = int(lo)
        m = int(hi) if hi is not None else None
        if m is not None and m < n:
            raise self.fail(f"has the repeat count {{{n},{m}}}, whose maximum is below its minimum.")
        top = max(n, m or 0)
        if top > STATE_LIMIT:
            raise self.fail(f"repeats {top} times, more than std::regex's {STATE_LIMIT} states allow.")
        text = b"{%d}" % n if hi == lo else (b"{%d,}" % n if m is None else b"{%d,%d}" % (n, m))
        return text, n, INF if m is None else m

    def plain(self, j: int) -> tuple[int, int] | None:
        """(byte, length) of a plain literal at ``j`` (a byte or an escaped punctuation mark), else None."""
        p = self.p
        if j >= len(p):
            return None
        c = p[j]
        if c == ord("\\"):
            if j + 1 < len(p) and p[j + 1] in _PUNCT:
                return p[j + 1], 2
            return None
        return None if c in _SPECIAL else (c, 1)

    def literals(self, c: int) -> None:
        """The literal ``c`` (at ``i - 1``) and the plain literals after it, as one atom; the last one before a
        quantifier stays an atom of its own, so the quantifier repeats that byte only."""
        p = self.p
        run = [c]
        while True:
            hit = self.plain(self.i)
            if hit is None:
                break
            after = self.i + hit[1]
            if after < len(p) and p[after] in b"*+?{":
                break
            run.append(hit[0])
            self.i = after
        text = b"".join(map(_lit, run))
        n = len(run)
        if len(self.stack) == 1:
            self.required.append((len(self.stack[0].pieces), bytes(run)))
        self.atom(text, weight=n, info=_Info(n, n, frozenset((c,))))

    @property
    def required_literal(self) -> bytes | None:
        """The longest literal run every match contains (at the top level, with no ``|`` there)."""
        if self.top_alternation or not self.required:
            return None
        return max((raw for _, raw in self.required), key=len)

    @property
    def simple(self) -> bool:
        """No loop over a group or a quantified atom, no back-reference, at most :data:`SIMPLE_LOOPS` loops:
        a backtracking search costs at most about ``len(name) ** (loops + 1)`` steps."""
        return not self.nested and not self.backref and self.loops <= SIMPLE_LOOPS

    def run(self) -> bytes:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            self.i += 1
            if c == ord("\\"):
                if self.i < len(p) and p[self.i] in b"bB":
                    self.backref |= p[self.i] == ord("B")  # (not for re: it never finds \B in an empty name)
                    self.atom(b"\\" + p[self.i : self.i + 1], kind="assertion")
                    self.i += 1
                    continue
                if self.i < len(p) and p[self.i] in b"123456789":
                    j = self.i
                    while j < len(p) and p[j] in _DIGITS:
                        j += 1
                    n = int(p[self.i : j])
                    self.i = j
                    if n > self.groups or n > 99 or any(f.group == n for f in self.stack):
                        raise self.fail(
                            f"refers back to group {n}, which does not exist or is not closed yet (std::regex refuses it)."
                        )
                    self.backref = True
                    self.atom(b"(?:\\%d)" % n, info=_Info(0, INF, frozenset(range(256))))
                    continue
                text, _ = self.escape(in_class=False)
                self.atom(text)
            elif c == ord("."):
                self.atom(b"[^\\n\\r]")
            elif c == ord("["):
                self.atom(self.bracket())
            elif c == ord("("):
                if len(self.stack) > MAX_DEPTH:
                    raise self.fail(f"nests groups more than {MAX_DEPTH} deep; simplify it.")
                if self.i < len(p) and p[self.i] == ord("?"):
                    kind = p[self.i + 1 : self.i + 2]
                    if kind not in (b":", b"=", b"!"):
                        raise self.fail(
                            f"has '(?{kind.decode(errors='replace')}', which ECMAScript std::regex refuses "
                            "(only (?:...), (?=...) and (?!...) exist there: no lookbehind, named groups or flags)."
                        )
                    self.i += 2
                    self.stack.append(_Frame(b"(?" + kind, kind != b":"))
                else:
                    self.groups += 1
                    self.stack.append(_Frame(b"(", False, self.groups))
            elif c == ord(")"):
                if len(self.stack) == 1:
                    raise self.fail("has a ) without its ( (std::regex refuses it).")
                f = self.stack.pop()
                self.atom(
                    f.head + b"".join(f.pieces) + b")",
                    weight=f.weight + f.last_weight + 2,
                    kind="assertion" if f.assertion else "atom",
                    group=True,
                    info=_Info(zero_width=True) if f.assertion else f.total(),
                )
            elif c == ord("|"):
                f = self.stack[-1]
                self.top_alternation |= len(self.stack) == 1
                f.pieces.append(b"|")
                f.weight += f.last_weight + 1
                f.branches.append(f.current())
                f.last, f.kind, f.last_weight, f.seq, f.info = None, None, 0, _EMPTY, None
            elif c == ord("^"):
                self.atom(b"^", kind="assertion")
            elif c == ord("$"):
                self.atom(b"\\Z", kind="assertion")
            elif c in b"*+?":
                lo, hi = {ord("*"): (0, INF), ord("+"): (1, INF), ord("?"): (0, 1)}[c]
                self.quantify(bytes([c]), lo, hi, 1 if c == ord("?") else 2, 2)
            elif c == ord("{"):
                text, lo, hi = self.braces()
                factor = max(1, lo if hi >= INF else hi) + (1 if hi >= INF else 0)
                self.quantify(text, lo, hi, factor, 2)
            else:
                self.literals(c)
        if len(self.stack) > 1:
            raise self.fail("has a ( without its ) (std::regex refuses it).")
        ways = self.stack[0].total().ways
        if ways > PATTERN_WAYS_LIMIT:
            raise self.fail(
                f"can match a name in about 2^{ways.bit_length() - 1} ways (loops after loops): std::regex would try "
                "them all on every name and llama-server would hang loading the model; simplify it."
            )
        return b"".join(self.stack[0].pieces)


def translate(pattern: str) -> bytes:
    """The ``regex`` bytes pattern matching exactly the names ``std::regex(pattern)`` finds; or :class:`PatternError`."""
    return _Translator(pattern).run()


class Compiled:
    """An ``-ot`` pattern ready to search :func:`name_bytes` names.

    :attr:`rx` is the ``regex`` pattern (searched with ``timeout=``). :attr:`fast` is the same text compiled
    by Python's ``re`` (several times faster) when the pattern is :attr:`simple`: its search cannot blow up
    on a name of bounded length, so it needs no timeout (None otherwise). The translation only uses syntax
    both read alike. :attr:`required` is a literal every match contains (None: no such literal), so a
    caller can skip names without it, or the whole search (``-ncmoe 1000000`` makes 512 patterns, most for
    layers the model does not have). Both are compiled when first used.
    """

    def __init__(self, pattern: str, text: bytes, simple: bool, required: bytes | None = None):
        self.pattern, self.text, self.simple, self.required = pattern, text, simple, required
        self._fast: re.Pattern | _Literals | None = None
        self._rx: regex.Pattern | None = None

    def _error(self, exc: Exception) -> PatternError:
        return PatternError(f"the override pattern {self.pattern!r} is not a valid regular expression: {exc}")

    @property
    def fast(self) -> re.Pattern | _Literals | None:
        if self.simple and self._fast is None:
            try:
                self._fast = re.compile(self.text)
            except (re.error, OverflowError, RecursionError, MemoryError) as exc:
                raise self._error(exc) from None
        return self._fast

    @property
    def rx(self) -> regex.Pattern:
        if self._rx is None:
            try:
                self._rx = regex.compile(self.text, regex.V0)
            except (regex.error, OverflowError, RecursionError, MemoryError) as exc:
                raise self._error(exc) from None
        return self._rx


def compile_pattern(pattern: str) -> Compiled:
    """:func:`translate`, ready to search (search it with :func:`name_bytes` of a tensor name)."""
    lits = _literal_set(pattern)
    if lits is not None:
        alternatives, required = lits
        c = Compiled(pattern, pattern.encode("ascii"), True, required)
        c._fast = _Literals(alternatives)
        return c
    t = _Translator(pattern)
    text = t.run()
    return Compiled(pattern, text, t.simple, t.required_literal)


class _Literals:
    """A pattern that is a set of literals (:func:`_literal_set`), searched the way ``re`` searches it."""

    __slots__ = ("alternatives",)

    def __init__(self, alternatives: tuple[bytes, ...]):
        self.alternatives = alternatives

    def search(self, name: bytes) -> bool:
        return any(a in name for a in self.alternatives)


#: One literal character of :func:`_literal_set`'s patterns: a letter, digit, ``_`` or ``-``, or ``\.``.
_LITERAL_ATOM = r"(?:[A-Za-z0-9_\-]|\\\.)"
_LITERAL_PATTERN = re.compile(rf"(?:{_LITERAL_ATOM}|\((?:\?:)?{_LITERAL_ATOM}*(?:\|{_LITERAL_ATOM}*)*\))*")
#: The most literals :func:`_literal_set` expands a pattern into.
_LITERAL_SET = 64


def _literal_set(pattern: str) -> tuple[tuple[bytes, ...], bytes | None] | None:
    """The literals a pattern of literal characters and groups of literal alternatives stands for, and its
    longest literal run outside the groups (every match holds it; None where it is empty): such a pattern finds
    a name exactly where one of them is in it (no quantifier, class or anchor, so ``std::regex`` reads it so
    too). What ``-ot`` patterns Layerdeck writes look like (``blk\\.14\\.ffn_(down|gate|up)_exps\\.``): searched
    as literals they skip :func:`translate` and ``re.compile``, 0.18 ms of each new pattern in a drag. None for
    any other pattern, or one of more than :data:`_LITERAL_SET` literals."""
    if len(pattern) > 512 or not _LITERAL_PATTERN.fullmatch(pattern):
        return None
    outs = [b""]
    runs = [b""]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "(":
            j = pattern.index(")", i)
            body = pattern[i + 1 : j].removeprefix("?:")
            alternatives = [a.replace("\\.", ".").encode("ascii") for a in body.split("|")]
            outs = [o + a for o in outs for a in alternatives]
            if len(outs) > _LITERAL_SET:
                return None
            runs.append(b"")
            i = j + 1
            continue
        if c == "\\":
            lit = b"."
            i += 2
        else:
            lit = c.encode("ascii")
            i += 1
        outs = [o + lit for o in outs]
        runs[-1] += lit
    return tuple(dict.fromkeys(outs)), max(runs, key=len) or None
