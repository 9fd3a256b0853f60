"""-ot regex generation: exact membership over 0..999, no commas, llama.cpp's first-match search semantics."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.command.ot_patterns import (
    FFN_EXPS_SUFFIX,
    int_set_regex,
    layer_pattern,
    override_value,
    portability_problems,
    verify_patterns,
)
from tests import std_regex

NUMBERS_TEXT = "\n".join(str(i) for i in range(1000))
NAMES = [f"blk.{i}.ffn_up_exps.weight" for i in range(1000)]
DECOYS = ([f"enc.blk.{i}.ffn_up_exps.weight" for i in range(0, 200, 7)]
          + [f"xblk.{i}.ffn_up_exps.weight" for i in range(0, 200, 11)]
          + ["token_embd.weight", "output.weight", "blk.1.ffn_gate_up_exps.weight", "blk.1.ffn_down_exps.weight"])
NAMES_TEXT = "\n".join(NAMES + DECOYS)
_LAYER = re.compile(r"blk\.([0-9]+)\.")


def _members(regex: str) -> set[int]:
    """Which of 0..999 the regex matches as a whole string (one multiline scan instead of 1000 fullmatch calls)."""
    return {int(m.group(0)) for m in re.finditer(rf"^(?:{regex})$", NUMBERS_TEXT, re.M)}


def _layers_matched(pattern: str) -> set[int]:
    """Layers of the names (one per line) in which ``pattern`` is found; decoys must never be hit."""
    found = set()
    for m in re.finditer(pattern, NAMES_TEXT, re.M):
        line_start = NAMES_TEXT.rfind("\n", 0, m.start()) + 1
        line = NAMES_TEXT[line_start:NAMES_TEXT.find("\n", m.start())]
        assert line in NAMES, f"{pattern!r} matched decoy {line!r}"
        found.add(int(_LAYER.match(line).group(1)))
    return found


def _check(numbers: set[int]) -> None:
    regex = int_set_regex(numbers)
    assert "," not in regex and "=" not in regex and "{" not in regex
    assert _members(regex) == numbers, regex
    pattern = layer_pattern(numbers, "ffn_up_exps")
    assert pattern.startswith("^blk\\.") and "," not in pattern
    assert _layers_matched(pattern) == numbers, pattern


def test_examples_from_the_brief():
    assert int_set_regex(set(range(10, 24))) == "1[0-9]|2[0-3]"
    assert int_set_regex(set(range(10))) == "[0-9]"
    assert int_set_regex(set(range(48))) == "[0-9]|[1-3][0-9]|4[0-7]"
    assert int_set_regex({5}) == "5"
    assert int_set_regex({0}) == "0"
    assert int_set_regex({1, 3}) == "[13]"  # shorter than (1|3) once grouped
    assert int_set_regex(range(0, 48, 2)) == "[02468]|[1-4][0246]|[1-3]8"
    assert layer_pattern(set(range(10, 24)), "ffn_(up|gate|down)_exps") == r"^blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_exps"
    assert layer_pattern({7}, "ffn_(up|gate|down)_exps", anchor=False) == r"blk\.7\.ffn_(up|gate|down)_exps"
    assert layer_pattern({7}, r"\." + FFN_EXPS_SUFFIX) == r"^blk\.7\.ffn_(up|down|gate|gate_up)_(ch|)exps"
    assert layer_pattern({1, 2}, "") == r"^blk\.[12]\."  # every tensor of those blocks


def test_every_contiguous_range_within_0_130():
    for a in range(131):
        for b in range(a, 131):
            _check(set(range(a, b + 1)))


def test_random_subsets_of_0_160():
    rng = random.Random(160)
    for _ in range(2000):
        density = rng.random()
        numbers = {i for i in range(161) if rng.random() < density} or {rng.randrange(161)}
        _check(numbers)


def test_exact_per_name_search_like_llama_cpp():
    """The bulk checks scan joined text; here the literal rule: re.search on each name, first match wins."""
    rng = random.Random(7)
    for _ in range(60):
        numbers = set(rng.sample(range(161), rng.randint(1, 40)))
        rest = set(range(161)) - numbers
        overrides = [(layer_pattern(numbers, "ffn_up_exps"), "CUDA0")]
        if rest:
            overrides.append((layer_pattern(rest, "ffn_(up|down)_exps"), "CPU"))
        got = verify_patterns(overrides, NAMES + DECOYS)
        for i, name in enumerate(NAMES):
            expected = "CUDA0" if i in numbers else ("CPU" if i in rest else None)
            assert got[name] == expected, (name, overrides)
        assert all(got[d] is None for d in DECOYS if not d.startswith("blk.1.ffn_down"))
        assert got["blk.1.ffn_down_exps.weight"] == ("CPU" if 1 in rest else None)


def test_anchor_keeps_t5_encoder_blocks_out():
    names = ["blk.3.ffn_up.weight", "enc.blk.3.ffn_up.weight", "dec.blk.3.ffn_up.weight", "blk.13.ffn_up.weight"]
    anchored = verify_patterns([(layer_pattern({3}, "ffn_up"), "CPU")], names)
    loose = verify_patterns([(layer_pattern({3}, "ffn_up", anchor=False), "CPU")], names)
    assert anchored == {names[0]: "CPU", names[1]: None, names[2]: None, names[3]: None}
    assert loose == {names[0]: "CPU", names[1]: "CPU", names[2]: "CPU", names[3]: None}
    enc = layer_pattern({3}, "ffn_up", block_prefix=r"enc\.blk")
    assert verify_patterns([(enc, "CPU")], names) == {names[0]: None, names[1]: "CPU", names[2]: None, names[3]: None}


def test_first_match_wins_and_none():
    names = ["blk.0.ffn_up_exps.weight", "blk.0.attn_q.weight", "output.weight"]
    got = verify_patterns([(r"blk\.0\.ffn", "CUDA0"), (r"blk\.0\.", "CPU")], names)
    assert got == {names[0]: "CUDA0", names[1]: "CPU", names[2]: None}


def test_rejects_what_llama_cpp_or_std_regex_would_read_differently():
    for bad in (r"blk\.[0-9]{1,2}\.", r"a=b", r"(?<=blk)\.", r"(?i)blk", r"(?P<n>x)", r"[[:digit:]]", r"blk\Z"):
        assert portability_problems(bad)
        with pytest.raises(ValueError):
            verify_patterns([(bad, "CPU")], ["blk.0.x"])
    assert portability_problems(r"^blk\.(1[0-9]|2[0-3])\." + FFN_EXPS_SUFFIX) == []
    assert portability_problems(r"blk\.[0-9]+[.]ffn_(?:up|down)(?!_shexp)") == []
    assert portability_problems("a(?=b)")  # a lookahead has an "="
    with pytest.raises(ValueError):
        verify_patterns([("(", "CPU")], ["x"])
    with pytest.raises(ValueError):
        layer_pattern({1}, "a,b")
    with pytest.raises(ValueError):
        int_set_regex(set())
    with pytest.raises(ValueError):
        int_set_regex({-1})
    with pytest.raises(TypeError):
        int_set_regex({True})


def test_override_value():
    assert override_value([("^blk\\.1\\.", "CPU"), ("x", "CUDA0")]) == "^blk\\.1\\.=CPU,x=CUDA0"
    assert override_value([("a", "RPC0[127.0.0.1:50052]")]) == "a=RPC0[127.0.0.1:50052]"
    for bad in ([("a,b", "CPU")], [("a=b", "CPU")], [("a", "")], []):
        with pytest.raises(ValueError):
            override_value(bad)




@pytest.mark.slow
def test_cpp_std_regex_ecmascript_agrees():
    """Compile the std::regex + regex_search call llama.cpp makes and compare every match with Python's re."""
    rng = random.Random(3)
    sets = [set(range(a, b)) for a, b in ((0, 48), (10, 24), (74, 94), (0, 1), (99, 131))]
    sets += [set(range(0, 94, 2)), set(range(1, 94, 2))]
    sets += [set(rng.sample(range(161), rng.randint(1, 60))) for _ in range(60)]
    patterns = []
    for s in sets:
        patterns.append(layer_pattern(s, FFN_EXPS_SUFFIX))
        patterns.append(layer_pattern(s, "\\." + FFN_EXPS_SUFFIX, anchor=False))
    patterns.append("\\." + FFN_EXPS_SUFFIX)  # -cmoe's own pattern, with its empty alternative
    names = [f"blk.{i}.ffn_{k}_{ch}exps.weight" for i in range(0, 170) for k in ("up", "gate_up") for ch in ("", "ch")]
    names += [f"blk.{i}.ffn_down_exps.bias" for i in range(0, 1000, 9)] + DECOYS
    rows = std_regex.verdicts(patterns, names)
    for pattern, bits in zip(patterns, rows, strict=True):
        py = "".join("1" if verify_patterns([(pattern, "X")], [n])[n] else "0" for n in names)
        assert bits == py, pattern


# --------------------------------------------------------------------------- user-written patterns vs std::regex


#: Pieces of -ot patterns as people write them (and worse): concatenations of these are compared with std::regex.
_PIECES = ['a', 'b', 'l', 'k', '.', '\\.', '_', '0', '1', '2', '[0-9]', '[a-z]', '[^.]', '[^a-z_]', '\\d', '\\D',
           '\\w', '\\W', '\\s', '\\b', '\\B', '^', '$', '(', ')', '(?:', '(?=', '(?!', '|', '*', '+', '?', '{2}',
           '{1,}', '{0,2}', '{3,5}', '*?', '+?', '??', '\\1', '\\2', 'exps', 'blk', 'ffn_', 'up', '[[:alpha:]]',
           '[[:digit:]]', '[-a]', ']', '}', 'é', '\\x2e', '[\\.\\d]', '[a-c-e]', 'x', 't', 'weight', 'output',
           '.*', '.+', '(.*)', '(\\w+)', '\\A', '[]', '[^]', '\\cA', '(?i)', '(?<=b)', '\\u0041', '[[.a.]]']
#: Written out: what users put in -ot, llama.cpp's own patterns, and each construct the dialects read differently.
_WRITTEN = [r"exps", r"\.ffn_(up|down|gate|gate_up)_(ch|)exps", r"blk\.[0-9]+\.ffn_.*_exps", r"ffn_.*=",
            r"blk\.(1[0-9]|2[0-3])\.ffn_(up|down)_exps", r"^blk\.\d+\.ffn_(?:up|gate)_exps\.weight$",
            r"blk\.[2-9][0-9]\.", r"(?!blk\.0\.)blk\.\d+\.ffn_up", r"\bup\b", r"[[:upper:]]", r"a++", r"a**",
            r"a{2}{3}", r"(.+)+X$", r"^(.*?){10}\.w$", r"(.*.*){12}\.w$", r"[]a]", r"[^]", r"\Ablk", r"blk\Z",
            r"\p{L}", r"(?P<n>x)", r"(?>a)", r"a{3", r"{", r"}", r"]", r"^*", r"\1", r"(a)\1", r"(a\1)", r"\8",
            r"\01", r"\0", r"é+", r"^.+$", r"[z-a]", r"[\d-z]", r"[a-\d]", r"\cA", r"[[=a=]]", r"\e", r"\k<n>"]
_MATCH_NAMES = ([f"blk.{i}.ffn_{k}_exps.weight" for i in (0, 1, 2, 10, 12, 47) for k in ("up", "down", "gate", "gate_up")]
                + ["blk.3.attn_q.weight", "blk.3.attn_k_norm.weight", "output.weight", "output_norm.weight",
                   "token_embd.weight", "enc.blk.1.ffn_down.weight", "v.blk.0.attn_out.bias",
                   "blk.5.ffn_down_chexps.weight", "blk.7.ffn_gate_inp.weight", "blk.7.ffn_up_shexp.weight",
                   "rope_freqs.weight", "é.blk.1", "a_b", "x", "", "blk.10.ffn_up.weight", "blk.1.ffn_up.weight",
                   "ab", "aab", "ba", "Blk.3.x", "a-b", "a]b", "a/b", "AAA"])


@pytest.mark.slow
def test_user_patterns_match_as_std_regex_or_are_refused():
    """Every pattern the estimator accepts finds exactly the names llama.cpp's std::regex finds (with either
    engine of a compiled pattern); every pattern std::regex refuses, hangs or crashes on is refused too."""
    from app.memory.ecmascript import PatternError, compile_pattern

    rng = random.Random(7)
    patterns = _WRITTEN + ["".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 8))) for _ in range(400)]
    rows = std_regex.verdicts(patterns, _MATCH_NAMES)
    accepted = refused_only_by_us = 0
    for pattern, cpp in zip(patterns, rows, strict=True):
        try:
            compile_pattern(pattern)
        except PatternError:
            refused_only_by_us += cpp not in ("ERR", "HANG", "CRASH")
            continue
        accepted += 1
        std_regex.assert_reads_like_std_regex(pattern, cpp, _MATCH_NAMES)
    # refused although std::regex reads them: [] / [^], \A-like and \c escapes, [.a.], loops over loops
    assert accepted >= 130 and refused_only_by_us <= 70, (accepted, refused_only_by_us)
    for pattern in _WRITTEN[:9]:  # what people write is read, not refused
        compile_pattern(pattern)


@pytest.mark.slow
def test_literal_patterns_are_searched_as_literals_and_read_as_std_regex():
    """Patterns of literal characters and groups of literal alternatives (what Layerdeck's own -ot patterns look
    like) skip the regex compilers (app.memory.ecmascript._literal_set): each finds exactly what std::regex finds,
    with every engine; a pattern with anything else in it (an unescaped dot, a quantifier, an anchor, a class, a
    nested group) goes the regex way."""
    from app.memory.ecmascript import _Literals, _literal_set, compile_pattern

    rng = random.Random(11)
    atoms = ["a", "b", "l", "k", "_", "-", "0", "1", "\\.", "blk", "ffn_", "up", "exps", "weight", "gate"]

    def run(n):
        return "".join(rng.choice(atoms) for _ in range(n))

    patterns = [r"blk\.14\.ffn_(down|gate|up)_exps\.", r"\.ffn_(up|down|gate|gate_up)_(ch|)exps", "", "()", "(|)"]
    for _ in range(300):
        out = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.4:
                alts = "|".join(run(rng.randint(0, 3)) for _ in range(rng.randint(1, 3)))
                out.append(("(?:" if rng.random() < 0.3 else "(") + alts + ")")
            else:
                out.append(run(rng.randint(1, 3)))
        patterns.append("".join(out))
    for p in patterns:
        assert _literal_set(p) is not None, p
        assert isinstance(compile_pattern(p).fast, _Literals), p
    others = [r"blk.1", r"blk\.1+", r"^blk", r"exps$", r"(a(b))", r"[ab]", r"a|b", r"\d", r"a{2}", r"(a|b)*"]
    for p in others:
        assert _literal_set(p) is None, p
    rows = std_regex.verdicts(patterns + others, _MATCH_NAMES)
    for pattern, cpp in zip(patterns + others, rows, strict=True):
        std_regex.assert_reads_like_std_regex(pattern, cpp, _MATCH_NAMES)
    found = sum("1" in cpp for cpp in rows[: len(patterns)])
    assert found >= 60, found  # the comparison is not only of patterns that find nothing


def test_catastrophic_patterns_end_in_a_typed_error_quickly():
    """-ot '(.+)+X$=CPU' hung import, estimate and the window's paste (Python's re backtracked for ever)."""
    import time

    from app.memory.layout import OverrideMatcher, PlacementError

    names = [f"blk.{i}.ffn_{k}_exps.weight" for i in range(94) for k in ("up", "down", "gate")]
    slow = [r"(.+)+X$", r"^(.*?){10}\.w$", r"(a*)*b", r"(\w+\.)+\w+X$", r".**exps.+{3,5}", r"(.*.*){12}\.w$",
            r"(.|\w)+X", r"(ab|a)*X", r"(?:[a-z]?){40}blk", r"(?:[a-z_.0-9]?){80}\.w$", r".*.*.*.*.*.*X",
            r"(?:[a-z_.0-9]?){16}(?:[a-z_.0-9]?){16}(?:[a-z_.0-9]?){16}\.w$"]
    for pattern in slow:  # each hangs (or takes minutes in) llama.cpp's std::regex
        t0 = time.monotonic()
        with pytest.raises(PlacementError, match="llama-server would hang loading the model"):
            OverrideMatcher(names).matches(pattern)
        assert time.monotonic() - t0 < 0.5, pattern
    for pattern in (r"(a|b)+X", r"(a?){10}X", r".*.*.*X", r"blk\.\d+\.ffn_.*_exps.*X"):  # slow at worst: read
        assert OverrideMatcher(names).matches(pattern) == frozenset()
    # what no rule sees is ended by the time budget (here: none left for a pattern the fast path cannot take)
    with pytest.raises(PlacementError, match=r"takes too long to match the model's tensor names .*simplify it"):
        OverrideMatcher(names, budget_s=0.0).matches(r"(a|b)+weight")
    # and an enormous automaton is refused before it is built (libstdc++'s limit is 100000 states)
    with pytest.raises(PlacementError, match="more than 100000 states"):
        OverrideMatcher(names).matches(r"((?:a{1000}){1000}){100}")
    with pytest.raises(PlacementError, match="more than 100000 states"):
        OverrideMatcher(names).matches("x" * 200_000)
    with pytest.raises(PlacementError, match="nests groups more than 100 deep"):
        OverrideMatcher(names).matches("(" * 5000 + ")" * 5000)


def test_std_regex_readings_that_python_reads_otherwise():
    from app.memory.layout import OverrideMatcher

    names = ["blk.0.ffn_up_exps.weight", "a\nb", "é", "aa", "xy"]
    m = OverrideMatcher(names)
    assert m.matches(r"b$") == frozenset({1})  # $: the end of the name, not before a final newline
    assert m.matches(r"^a.b$") == frozenset()  # . is not \n
    assert m.matches(r"^a{1}{2}$") == frozenset({3})  # a quantifier after a quantifier repeats the quantified atom
    assert m.matches(r"[[:alpha:]]{2}") == frozenset({0, 3, 4})  # POSIX classes, ASCII letters only
    assert m.matches("^\xc3$") == frozenset()  # bytes: é is two of them
    assert m.matches("^.{2}$") == frozenset({2, 3, 4})


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(st.text(alphabet="ab.\n\x00é", max_size=6), max_size=12),
    literal=st.text(alphabet="ab.\n\x00é", max_size=4),
)
def test_holding_finds_the_names_that_contain_a_literal(names, literal):
    """OverrideMatcher.holding (find over the names end to end) is `literal in name` per name: a match that
    spans two names, the separator or an empty name is not counted, whatever the names hold."""
    from app.memory.ecmascript import name_bytes
    from app.memory.layout import OverrideMatcher

    lit = name_bytes(literal)
    want = [i for i, n in enumerate(names) if lit in name_bytes(n)]
    assert OverrideMatcher(names).holding(lit) == want


def test_a_required_literal_narrows_the_search_without_changing_it():
    """The regex runs only on the names holding the pattern's required literal: the matches are the same as a
    search of every name."""
    from app.memory.layout import OverrideMatcher, _compiled

    names = [f"blk.{i}.ffn_{k}_exps.weight" for i in range(40) for k in ("up", "down", "gate")] + ["blk.1\nx.ffn_"]
    m = OverrideMatcher(names)
    for pattern in (r"blk\.1\.ffn_(up|down)_exps", r"blk\.1[0-9]\.ffn_gate", r"^blk\.3\.", r"ffn_(up|gate)_exps\.w"):
        c = _compiled(pattern)
        assert c.required is not None, pattern
        every = frozenset(i for i, n in enumerate(names) if re.search(c.text.decode("latin-1"), n))
        assert m.matches(pattern) == every and every, pattern
