"""-ot regex generation: exact membership over 0..999, no commas, llama.cpp's first-match search semantics."""

from __future__ import annotations

import random
import re
import shutil
import subprocess

import pytest

from app.command.ot_patterns import (
    FFN_EXPS_SUFFIX,
    int_set_regex,
    layer_pattern,
    override_value,
    portability_problems,
    verify_patterns,
)

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


_CPP = r"""
#include <iostream>
#include <regex>
#include <string>
#include <vector>
// llama.cpp: std::regex pattern(override.pattern); std::regex_search(tensor_name, pattern)
int main() {
    std::string line;
    std::getline(std::cin, line);
    int np = std::stoi(line);
    std::vector<std::regex> pats;
    for (int i = 0; i < np; i++) { std::getline(std::cin, line); pats.emplace_back(line); }
    std::vector<std::string> names;
    while (std::getline(std::cin, line)) names.push_back(line);
    for (auto &p : pats) {
        std::string bits;
        for (auto &n : names) bits += std::regex_search(n, p) ? '1' : '0';
        std::cout << bits << '\n';
    }
}
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_cpp_std_regex_ecmascript_agrees(tmp_path):
    """Compile the std::regex + regex_search call llama.cpp makes and compare every match with Python's re."""
    src = tmp_path / "match.cpp"
    src.write_text(_CPP)
    exe = tmp_path / "match"
    subprocess.run(["g++", "-O1", "-std=c++17", "-o", str(exe), str(src)], check=True, timeout=300)
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
    stdin = "\n".join([str(len(patterns)), *patterns, *names]) + "\n"
    proc = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=300, check=True)
    rows = proc.stdout.split()
    assert len(rows) == len(patterns)
    for pattern, bits in zip(patterns, rows, strict=True):
        py = "".join("1" if verify_patterns([(pattern, "X")], [n])[n] else "0" for n in names)
        assert bits == py, pattern
