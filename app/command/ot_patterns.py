"""Short, exact ``-ot`` / ``--override-tensor`` regexes for sets of layer numbers.

llama.cpp reads ``-ot`` as ``PATTERN=BUFT[,PATTERN=BUFT...]``: the value is
split on every ``,`` and each item at its first ``=``, so a pattern can
contain neither (no ``{m,n}`` quantifiers). Each pattern is a ``std::regex``
(ECMAScript) used with ``regex_search``: unanchored, and the first pattern in
list order that is found in a tensor name wins (``-ot``, ``-cmoe``,
``-ncmoe`` all append to that one list).

The patterns made here only use constructs that behave identically in
ECMAScript ``std::regex`` and Python (literal characters, ``\\.``, digit
classes ``[0-9]``/``[13-5]``, ``|``, ``(...)`` and ``^``);
:func:`verify_patterns` matches them as the estimator does
(:mod:`app.memory.ecmascript`: ``std::regex``'s reading, time-bounded).

Anchoring: llama.cpp's own patterns (``blk\\.<i>\\.ffn_...``) are not
anchored, and ``blk.`` is not only found at the start of a name: T5 and
T5-encoder models name their blocks ``enc.blk.N.*`` and ``dec.blk.N.*``
(and multimodal projector files use ``v.blk.``/``a.blk.``), so an unanchored
``blk\\.3\\.`` also matches ``enc.blk.3.attn_q.weight``. :func:`layer_pattern`
therefore starts with ``^`` by default: one character, and the pattern then
means exactly "blocks N of the main stack" (pass ``block_prefix=r"enc\\.blk"``
for an encoder stack). The ``\\.`` after the number keeps ``blk\\.1\\.`` from
matching ``blk.10.``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from ..memory.layout import OverrideMatcher

__all__ = [
    "int_set_regex",
    "layer_pattern",
    "override_value",
    "verify_patterns",
    "portability_problems",
    "FFN_EXPS_SUFFIX",
]

#: ``LLM_FFN_EXPS_REGEX`` from llama.cpp's ``common/common.h`` (what ``-cmoe``/``-ncmoe`` use), without its leading ``\.``.
FFN_EXPS_SUFFIX = r"ffn_(up|down|gate|gate_up)_(ch|)exps"


def _digit_class(digits: Iterable[int]) -> str:
    """Shortest class for a set of digits: ``5``, ``[05]``, ``[0-9]``, ``[13-57]``."""
    ds = sorted(set(digits))
    if len(ds) == 1:
        return str(ds[0])
    runs: list[list[int]] = [[ds[0]]]
    for d in ds[1:]:
        if d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    body = "".join(f"{r[0]}-{r[-1]}" if len(r) >= 3 else "".join(map(str, r)) for r in runs)
    return f"[{body}]"


@lru_cache(maxsize=65536)
def _fixed(strings: frozenset[str]) -> tuple[str, bool]:
    """Regex for a set of digit strings of one length (leading zeros allowed); (text, is a top-level alternation)."""
    length = len(next(iter(strings)))
    if length == 0:
        return "", False
    if length == 1:
        return _digit_class(int(s) for s in strings), False
    best: tuple[str, bool] | None = None
    for from_front in (True, False):
        cand = _factor(strings, from_front)
        if best is None or _grouped_len(cand[0]) < _grouped_len(best[0]):
            best = cand
    assert best is not None
    return best


def _factor(strings: frozenset[str], from_front: bool) -> tuple[str, bool]:
    """Group by the first (or last) digit; digits whose remainders are the same set share one class."""
    rests: dict[str, set[str]] = {}
    for s in strings:
        head, rest = (s[0], s[1:]) if from_front else (s[-1], s[:-1])
        rests.setdefault(head, set()).add(rest)
    heads_by_rest: dict[frozenset[str], set[int]] = {}
    for head, rs in rests.items():
        heads_by_rest.setdefault(frozenset(rs), set()).add(int(head))
    alts = []
    for rest_set, heads in heads_by_rest.items():
        sub, is_alt = _fixed(rest_set)
        if is_alt:
            sub = f"({sub})"
        cls = _digit_class(heads)
        text = cls + sub if from_front else sub + cls
        first = str(min(heads)) + min(rest_set) if from_front else min(rest_set) + str(min(heads))
        alts.append((first, text))
    alts.sort()
    return "|".join(t for _, t in alts), len(alts) > 1


def int_set_regex(numbers: Iterable[int]) -> str:
    """A regex alternation that, matched as a whole word, matches exactly these non-negative integers.

    Numbers are written without leading zeros. Each digit-length group is
    factored by its first digit (``1[0-9]|2[0-3]``) and by its last digit
    (``[1-4][0246]|[1-3]8``), recursively, keeping the shorter; the groups are
    joined with ``|``. This is short for ranges and regular strides but not
    always the shortest regex possible (it never uses ``?`` to merge lengths
    or factors across groups). Never contains ``,`` or ``=``.

    >>> int_set_regex(range(10, 24))
    '1[0-9]|2[0-3]'
    >>> int_set_regex(range(48))
    '[0-9]|[1-3][0-9]|4[0-7]'
    """
    nums = set()
    for n in numbers:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"layer numbers must be int, got {n!r}")
        if n < 0:
            raise ValueError(f"layer numbers must be >= 0, got {n}")
        nums.add(n)
    if not nums:
        raise ValueError("an empty set of numbers has no regex")
    by_len: dict[int, set[str]] = {}
    for n in nums:
        s = str(n)
        by_len.setdefault(len(s), set()).add(s)
    parts = [_fixed(frozenset(by_len[k]))[0] for k in sorted(by_len)]
    factored = "|".join(parts)
    plain = "|".join(str(n) for n in sorted(nums))
    return plain if _grouped_len(plain) < _grouped_len(factored) else factored


def _grouped_len(regex: str) -> int:
    """Length once used inside a pattern, where an alternation needs ``(...)``."""
    return len(regex) + (2 if "|" in regex else 0)


def layer_pattern(layers: Iterable[int], suffix_regex: str, *, anchor: bool = True, block_prefix: str = r"blk") -> str:
    """``^blk\\.(<layers>)\\.<suffix>``: the tensors named by ``suffix_regex`` in exactly these blocks.

    ``suffix_regex`` is what follows ``blk.N.``, e.g. ``ffn_(up|gate|down)_exps``
    (a leading ``\\.`` is accepted too, as in llama.cpp's
    ``\\.ffn_(up|down|gate|gate_up)_(ch|)exps``). ``anchor=False`` drops the
    ``^`` (see the module docstring for why it is on by default).

    >>> layer_pattern(range(10, 24), "ffn_(up|gate|down)_exps")
    '^blk\\\\.(1[0-9]|2[0-3])\\\\.ffn_(up|gate|down)_exps'
    """
    nums = int_set_regex(layers)
    group = f"({nums})" if "|" in nums else nums
    sep = "" if suffix_regex.startswith("\\.") else "\\."
    pattern = ("^" if anchor else "") + block_prefix + "\\." + group + sep + suffix_regex
    for bad in ",=":
        if bad in pattern:
            raise ValueError(f"-ot patterns cannot contain {bad!r} (llama.cpp splits the value on it): {pattern!r}")
    return pattern


def override_value(overrides: Iterable[tuple[str, str]]) -> str:
    """The ``-ot`` value for ``[(pattern, buffer_type), ...]``: ``p1=CPU,p2=CUDA0``; rejects ',' and '=' in parts."""
    items = []
    for pattern, buft in overrides:
        if not pattern or not buft:
            raise ValueError(f"empty pattern or buffer type in {(pattern, buft)!r}")
        for what, text in (("pattern", pattern), ("buffer type", buft)):
            for bad in ",=":
                if bad in text:
                    raise ValueError(f"-ot {what} {text!r} contains {bad!r}, which llama.cpp splits on")
        items.append(f"{pattern}={buft}")
    if not items:
        raise ValueError("no overrides")
    return ",".join(items)


_NON_PORTABLE = [
    (re.compile(r"\(\?<[=!]"), "lookbehind (std::regex ECMAScript has none)"),
    (re.compile(r"\(\?P"), "Python named group"),
    (re.compile(r"\(\?[aiLmsux-]"), "inline flags (not ECMAScript)"),
    (re.compile(r"\(\?[<#>]"), "named group, comment or atomic group (not ECMAScript)"),
    (re.compile(r"\[[:.=][^\]]*[:.=]\]"), "POSIX class or collating element inside [] (ECMAScript only)"),
    (re.compile(r"\\[AZzG]"), "\\A, \\Z, \\z or \\G (Python only)"),
    (re.compile(r"[*+?}][+]"), "possessive quantifier"),
]


def portability_problems(pattern: str) -> list[str]:
    """Constructs in ``pattern`` that llama.cpp rejects or that Python's ``re`` reads differently (empty: none found).

    A heuristic scan, not a full parser. Python is compiled with ``re.ASCII``
    in :func:`verify_patterns`, so ``\\d``, ``\\w``, ``\\s``, ``\\b`` agree with
    ECMAScript on tensor names (which are ASCII without newlines, so ``$`` and
    ``.`` agree too).
    """
    out = []
    for bad in ",=":
        if bad in pattern:
            out.append(f"{bad!r}: llama.cpp splits the -ot value on it")
    for rx, what in _NON_PORTABLE:
        if rx.search(pattern):
            out.append(what)
    return out


def verify_patterns(patterns: list[tuple[str, str]], tensor_names: Iterable[str]) -> dict[str, str | None]:
    """Tensor name -> buffer type of the first pattern found in it (``regex_search``), or None: llama.cpp's rule.

    Matches exactly as the estimator does (:class:`app.memory.layout.OverrideMatcher`: ``std::regex``
    ECMAScript semantics, time-bounded). Raises ValueError for a pattern that :func:`portability_problems`
    flags (stricter than llama.cpp: what Layerdeck writes must read the same everywhere), that llama.cpp
    would refuse, or that takes too long to match (:class:`~app.memory.layout.PlacementError`).
    """
    for pattern, _ in patterns:
        problems = portability_problems(pattern)
        if problems:
            raise ValueError(f"pattern {pattern!r} is not portable to llama.cpp: {'; '.join(problems)}")
    names = list(dict.fromkeys(tensor_names))
    hits = OverrideMatcher(names).resolve(list(patterns))
    return {name: hits.get(i) for i, name in enumerate(names)}
