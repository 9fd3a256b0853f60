"""Fuzzing the llama.cpp door: argument lists and pasted command text, through the core and the CLI.

Inputs come from the flag table (:data:`app.command.flags.FLAGS`): every spelling (``--ctx_size`` too),
``--flag=value``, ``LLAMA_ARG_*`` variables, and values from valid, boundary and hostile sets (huge,
negative, NaN/inf numbers, empty strings, regexes with nested quantifiers, ``,`` and ``=`` inside ``-ot``,
unicode, paths that are not UTF-8); pasted text is that command written for bash, PowerShell or cmd (with
environment prefixes and line continuations), then damaged. Every input must end, within
:data:`~tests.fuzz.conftest.TIME_BUDGET_S`, in a result or a :class:`~app.errors.LayerdeckError`:

- the core: :func:`app.command.parse.parse_llama_args` and :meth:`app.session.Session.import_command` on a
  tiny MoE model, then the estimate of the parsed settings (peak memory under
  :data:`~tests.fuzz.conftest.MEMORY_BUDGET_BYTES`, by ``tracemalloc``);
- the CLI, in-process: ``canonical``, ``estimate`` and ``import`` exit with 0, 1 or 2 and print no traceback;
- the ``-ot`` patterns: what the estimator accepts matches exactly the tensor names llama.cpp's
  ``std::regex`` finds, and what ``std::regex`` refuses (or hangs on) is refused (needs ``g++``).

``LAYERDECK_FUZZ_DUMP=FILE`` appends every generated input as a JSON line (to replay the same inputs
elsewhere, e.g. against an older checkout); ``LAYERDECK_FUZZ_STATS=FILE`` writes the outcome counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
import tracemalloc
from collections import Counter

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from app.cli import main as cli_main
from app.command.flags import FLAGS
from app.command.parse import parse_llama_args
from app.command.shells import QuoteError, quote_cmd, quote_posix, quote_powershell
from app.errors import LayerdeckError
from app.memory.device_adapter import parse_device_spec
from app.memory.ecmascript import PatternError, compile_pattern
from app.memory.settings import CACHE_TYPES
from app.model import open_model
from app.session import Session
from tests import std_regex
from tests.fuzz.conftest import MEMORY_BUDGET_BYTES, TIME_BUDGET_S
from tests.gguf_factory import write_tiny_model

DEVICES = "CUDA0=8192,CUDA1=8192"
STATS: Counter[str] = Counter()
PEAK = {"bytes": 0}

# --------------------------------------------------------------------------- value sets

NUMBERS = ["0", "1", "-1", "-2", "2", "3", "7", "48", "255", "256", "257", "511", "512", "513", "4096", "2147483647",
           "2147483648", "-2147483648", "-2147483649", "9223372036854775808", "99999999999999999999999999",
           "1000000", "100000000", "1e308", "-1e308", "3.4e38", "3e38", "1e-50", "nan", "NaN", "inf", "-inf",
           "infinity", "1_000", " 12", "12 ", "+5", "0x10", "\u0661\u0662", "", " ", "-0", "1.5", "auto", "all",
           "ALL", "on", "off"]
PATH_PIECES = ["/m/model.gguf", "C:\\models\\m.gguf", "my model.gguf", "it's", '"q"', "$HOME", "%PATH%", "!x!", "^",
               "&", "a\nb", "\r", "\t", "模型", "🦙", "\\\\server\\share", os.fsdecode(b"\xff\xfe"), "~x", "${PORT}",
               "#", "", " ", "\u2028", "\x00"]
REGEX_PIECES = ["blk", "\\.", "[0-9]", "[0-9]+", "\\d", "\\d+", "(", ")", "(?:", "(?=", "(?!", "(?<=", "(?i)", "|",
                "*", "+", "?", "{2}", "{3,}", "*?", "ffn_", "(up|down|gate)", "_exps", "exps", ".*", ".+", "(.+)+",
                "(.*)*", "(a|a)*", "^", "$", "\\b", "[[:digit:]]", "[]", "[^]", "\\A", "\\Z", "\\1", "(\\w+)",
                "{", "}", "]", "é", "模", ",", "=", "\\", "[a-", "(?P<n>", "a{2}{3}", ".**", "(?:[a-z]?){40}"]
BUFFER_TYPES = ["CPU", "CUDA0", "CUDA1", "RPC0[127.0.0.1:50052]", "bogus", "", "cpu", "CUDA_Host"]
DEVICE_LISTS = ["CUDA0", "CUDA0,CUDA1", "CUDA1,CUDA0", "none", "CPU", "", ",", "CUDA9", "CUDA0/CUDA1", "cuda0"]
RPC_LISTS = ["127.0.0.1:50052", "", ",", "a:b:c", "[::1]:1", "host", "127.0.0.1:50052,127.0.0.1:50052"]


def _regex() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(REGEX_PIECES), min_size=1, max_size=8).map("".join)


def _override() -> st.SearchStrategy[str]:
    item = st.one_of(
        st.tuples(_regex(), st.sampled_from(BUFFER_TYPES)).map(lambda t: f"{t[0]}={t[1]}"),
        st.sampled_from(["(.+)+X$=CPU", "exps=CPU", r"blk\.(1|2)\.ffn_.*=CUDA0", "=CPU", "x=", "a==b", "noequals",
                         r"^(.*?){10}\.w$=CPU", "模型=CPU", r"\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"]),
    )
    return st.lists(item, min_size=1, max_size=4).map(",".join) | st.just("")


def _number() -> st.SearchStrategy[str]:
    return st.sampled_from(NUMBERS) | st.integers(-(2**40), 2**40).map(str) | st.floats().map(repr)


def _split() -> st.SearchStrategy[str]:
    return st.tuples(st.lists(_number(), min_size=0, max_size=17), st.sampled_from([",", "/", ",,", ",/"])).map(
        lambda t: t[1].join(t[0]))


def _text() -> st.SearchStrategy[str]:
    return st.sampled_from(PATH_PIECES) | st.text(max_size=12)


def value_for(flag) -> st.SearchStrategy[str]:
    """Values for one flag: valid, boundary and hostile, by what the flag reads."""
    setting, convert = flag.setting, getattr(flag.convert, "__name__", "")
    if setting == "overrides" and flag.nargs:
        return _override() if convert == "overrides" else _number()
    if setting == "tensor_split":
        return _split()
    if setting in ("type_k", "type_v"):
        return st.sampled_from([*CACHE_TYPES, "Q8_0", "q3_k", "bogus", "", "f16 "])
    if setting == "devices":
        return st.sampled_from(DEVICE_LISTS)
    if setting == "rpc":
        return st.sampled_from(RPC_LISTS)
    if setting == "model":
        return st.sampled_from(["MODEL", "MODEL", "/no/such.gguf", "", *PATH_PIECES[:4]])
    if flag.choices:
        return st.sampled_from(sorted(flag.choices)) | _text()
    if setting is not None or flag.metavar in ("N", "INDEX", "SEED"):
        return _number()
    return _text()


SPELLINGS = [(f, s) for f in FLAGS for s in f.spellings]


@st.composite
def argv_case(draw) -> dict:
    """An argument list (program optional) with ``LLAMA_ARG_*`` variables, from the flag table."""
    argv: list[str] = []
    if draw(st.booleans()):
        argv.append(draw(st.sampled_from(["llama-server", "llama-cli", "/opt/llama/llama-server", "C:\\l\\llama-server.exe"])))
    argv += ["-m", "MODEL"]
    for _ in range(draw(st.integers(0, 8))):
        flag, spelling = draw(st.sampled_from(SPELLINGS))
        if spelling.startswith("--") and draw(st.integers(0, 9)) == 0:
            spelling = spelling.replace("-", "_").replace("__", "--", 1)  # --ctx_size
        n = flag.nargs
        if n and draw(st.integers(0, 7)) == 0:
            argv.append(f"{spelling}={draw(value_for(flag))}")
            continue
        argv.append(spelling)
        if flag.bench_value and draw(st.booleans()):
            argv.append(draw(st.sampled_from(["0", "1"])))
        if flag.bare is not None and draw(st.booleans()):
            argv.append(draw(st.sampled_from(sorted(flag.choices or {"on"}))))
        for _ in range(n):
            if draw(st.integers(0, 15)):
                argv.append(draw(value_for(flag)))
    if draw(st.integers(0, 5)) == 0:
        argv.append(draw(_text()))  # a stray word
    env: dict[str, str] = {}
    for flag in draw(st.lists(st.sampled_from([f for f in FLAGS if f.env]), max_size=3)):
        env[flag.env] = draw(value_for(flag)) if flag.nargs else draw(st.sampled_from(["1", "0", "on", "", "x"]))
    return {"kind": "argv", "argv": argv, "env": env, "tool": draw(st.sampled_from(["server", "server", "cli", "bench"]))}


_DAMAGE = ["\\\n", "`\n", "^\n", "'", '"', " | x", " && y", "$(id)", "`id`", " # c", "\n", "\r\n", ";", " & z", "(",
           "$env:", "%", "!", "\\", "\x00", "\u2028", "export A=1; ", "env B=2 ", "set C=3\n", "@('--%') "]


@st.composite
def text_case(draw) -> dict:
    """Pasted command text: an argument list written for one shell (multi-line or not), then maybe damaged."""
    case = draw(argv_case())
    argv = [a.replace("MODEL", "/m/x.gguf") for a in case["argv"]]
    if not argv or argv[0].startswith("-"):
        argv.insert(0, "llama-server")
    env = case["env"]
    shell = draw(st.sampled_from(["bash", "powershell", "cmd"]))
    multiline = draw(st.booleans())
    try:
        text = {"bash": lambda: quote_posix(argv, env=env, multiline=multiline),
                "powershell": lambda: quote_powershell(argv, env=env, multiline=multiline),
                "cmd": lambda: quote_cmd(argv, env=env, multiline=multiline)}[shell]()
    except (QuoteError, ValueError):
        text = " ".join(argv)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(_DAMAGE)) + text[at:]
    return {"kind": "text", "text": text, "shell": draw(st.sampled_from([None, None, shell]))}


@st.composite
def cli_case(draw) -> dict:
    case = draw(argv_case())
    argv = [a for a in case["argv"] if not a.startswith(("llama-", "/opt", "C:\\l"))]
    return {"kind": "cli", "door": draw(st.sampled_from(["canonical", "estimate", "import"])), "argv": argv}


# --------------------------------------------------------------------------- the doors


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return str(write_tiny_model("qwen3moe", tmp_path_factory.mktemp("fuzzargs") / "moe.gguf"))


@pytest.fixture(scope="module")
def session(model_path):
    return Session.open(model_path, parse_device_spec(DEVICES))


def _dump(case: dict) -> None:
    path = os.environ.get("LAYERDECK_FUZZ_DUMP")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(case) + "\n")


def _timed(fn):
    t0 = time.monotonic()
    outcome = fn()
    elapsed = time.monotonic() - t0
    assert elapsed <= TIME_BUDGET_S, f"took {elapsed:.1f} s"
    return outcome


def run_core(case: dict, session: Session, model_path: str) -> str:
    """``result`` or ``typed``; anything else (an untyped exception) fails the test."""
    tracemalloc.start()
    try:
        if case["kind"] == "text":
            try:
                session.import_command(case["text"], case["shell"])
                outcome = "result"
            except LayerdeckError:
                outcome = "typed"
        else:
            argv = [model_path if a == "MODEL" else a for a in case["argv"]]
            try:
                parsed = parse_llama_args(argv, tool=case["tool"], env=case["env"])
                session.estimate_settings(parsed.settings)
                session.import_command(quote_posix(argv, env=case["env"]))
                outcome = "result"
            except LayerdeckError:
                outcome = "typed"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    PEAK["bytes"] = max(PEAK["bytes"], peak)
    assert peak <= MEMORY_BUDGET_BYTES, f"peak {peak >> 20} MiB"
    return outcome


def run_cli(case: dict, model_path: str) -> str:
    argv = [model_path if a == "MODEL" else a for a in case["argv"]]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main([case["door"], "--devices", DEVICES, "--", "-m", model_path, *argv])
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    assert code in (0, 1, 2), code
    assert "Traceback" not in err.getvalue()
    return "result" if code == 0 else "typed"


def _count(door: str, outcome: str) -> None:
    STATS[f"{door}:{outcome}"] += 1
    STATS[f"{door}:inputs"] += 1


# regressions found by this fuzzer or named in the issue (each failed before)
_REGRESSIONS = [
    {"kind": "argv", "argv": ["-m", "MODEL", "-ot", "(.+)+X$=CPU"], "env": {}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL"], "env": {"LLAMA_ARG_OVERRIDE_TENSOR": "(.+)+X$=CPU"}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL", "-ncmoe", "100000000"], "env": {}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL", "-ts", "1e308,1e308"], "env": {}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL", "-c", "9223372036854775808"], "env": {}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL", "-np", "1000000000"], "env": {}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL", "-ts", "nan,1"], "env": {}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL", "-ts", "-1,2"], "env": {}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL", "-ot", "[[:digit:]]=CPU,^(.*?){10}\\.w$=CPU"], "env": {}, "tool": "server"},
    {"kind": "argv", "argv": ["-m", "MODEL", "-ngl", "1e308", "-b", "-1"], "env": {}, "tool": "cli"},
]


@given(case=argv_case())
@example(case=_REGRESSIONS[0])
@example(case=_REGRESSIONS[1])
@example(case=_REGRESSIONS[2])
@example(case=_REGRESSIONS[3])
@example(case=_REGRESSIONS[4])
@example(case=_REGRESSIONS[5])
@example(case=_REGRESSIONS[6])
@example(case=_REGRESSIONS[7])
@example(case=_REGRESSIONS[8])
@example(case=_REGRESSIONS[9])
def test_argument_lists_end_in_a_result_or_a_typed_error(case, session, model_path):
    _dump(case)
    _count("core-argv", _timed(lambda: run_core(case, session, model_path)))


@given(case=text_case())
@example(case={"kind": "text", "text": "LLAMA_ARG_OVERRIDE_TENSOR='(.+)+X$=CPU' llama-server -m x.gguf", "shell": None})
@example(case={"kind": "text", "text": "llama-server -m 'x.gguf\n-c 1", "shell": None})  # shlex's untyped ValueError
@example(case={"kind": "text", "text": "& 'llama-server' -m 'x.gguf' `\n  -ts 'nan,1'", "shell": None})
@example(case={"kind": "text", "text": "set LLAMA_ARG_N_PARALLEL=1000000000\nllama-server -m x.gguf", "shell": "cmd"})
@example(case={"kind": "text", "text": "llama-server $'-m' $'\\xff.gguf' -ncmoe 100000000", "shell": "bash"})
def test_pasted_commands_end_in_a_result_or_a_typed_error(case, session, model_path):
    _dump(case)
    _count("core-text", _timed(lambda: run_core(case, session, model_path)))


@given(case=cli_case())
@example(case={"kind": "cli", "door": "import", "argv": ["-ot", "(.+)+X$=CPU"]})
@example(case={"kind": "cli", "door": "estimate", "argv": ["-ncmoe", "100000000"]})
@example(case={"kind": "cli", "door": "estimate", "argv": ["-ts", "1e308,1e308"]})
@example(case={"kind": "cli", "door": "import", "argv": ["-ctv", "q8_0", "-fa", "off"]})
@example(case={"kind": "cli", "door": "canonical", "argv": ["-m", os.fsdecode(b"/no/\xff.gguf")]})
def test_the_cli_exits_0_1_or_2_without_a_traceback(case, model_path):
    _dump(case)
    _count(f"cli-{case['door']}", _timed(lambda: run_cli(case, model_path)))


# --------------------------------------------------------------------------- -ot patterns against std::regex



@given(pattern=_regex())
@example(pattern="(.+)+X$")
@example(pattern="[[:digit:]]")
@example(pattern="blk\\Z")
@example(pattern="[]a]")
@example(pattern="a**")
@example(pattern="(?:[a-z]?){40}")
def test_ot_patterns_find_what_std_regex_finds_or_are_refused(pattern, model_path):
    names = [t.name for t in open_model(model_path).tensors] + ["enc.blk.1.ffn_up_exps.weight", "", "é.x"]
    if "\x00" in pattern or "\n" in pattern:
        return
    _dump({"kind": "ot", "pattern": pattern})
    (cpp,) = std_regex.verdicts([pattern], names, timeout=30)
    try:
        compile_pattern(pattern)
    except PatternError:
        _count("ot", "typed")
        return
    std_regex.assert_reads_like_std_regex(pattern, cpp, names)
    _count("ot", "result")


def teardown_module(module) -> None:
    path = os.environ.get("LAYERDECK_FUZZ_STATS")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"counts": dict(STATS), "peak_bytes": PEAK["bytes"]}, f, indent=1)
