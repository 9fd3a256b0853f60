"""The llama-swap YAML and Ollama Modelfile exports, read back the way those programs read them.

llama-swap (``proxy/config/config.go``): the YAML is loaded, ``${...}`` macros are substituted in ``cmd``
(``${PORT}`` by the model's port), ``#`` comment lines are dropped and lines ending in ``\\`` joined
(``SanitizeCommand``), then the text is split by ``github.com/billziss-gh/golib/shlex`` (``Posix``). A model
entry is ``models: NAME: cmd:`` with optional ``ttl``, ``env`` (a list of ``NAME=value``), ``proxy``,
``aliases``, ``checkEndpoint``, ``unlisted``. Ollama (``parser/parser.go`` ``ParseFile``): one command per
line (``FROM``, ``PARAMETER name value``, ...), ``#`` comments, values trimmed and unquoted. Both
readers are ported below, line for line, so the tests read what those programs would.
"""

from __future__ import annotations

import pytest
import yaml

from app.command.formats import llama_swap_entry, ollama_modelfile, render
from app.command.shells import QuoteError

# --------------------------------------------------------------------------- llama-swap's reading

#: The model keys llama-swap documents (docs/configuration.md, config.example.yaml) that an export may use.
SWAP_MODEL_KEYS = {"cmd", "ttl", "env", "proxy", "aliases", "checkEndpoint", "unlisted", "cmdStop", "name",
                   "description", "useModelName", "filters", "metadata", "macros", "concurrencyLimit"}

_NOESC, _EMPTY = object(), object()


def _golib_escape(state: str, r: str, r0):
    """``shlex.Posix.Escape`` of golib."""
    if r != "\\":
        return _NOESC
    if state in (" ", "A"):
        return _EMPTY if r0 == "\n" or r0 is _EMPTY else r0
    if state == '"':
        if r0 == "\n" or r0 is _EMPTY:
            return _EMPTY
        return r0 if r0 in ("$", "`", '"', "\\") else _NOESC
    return _NOESC


def golib_posix_split(line: str) -> list[str]:
    """``shlex.Posix.Split`` of github.com/billziss-gh/golib (what llama-swap splits ``cmd`` with)."""
    tokens: list[str] = []
    token: list[str] | None = None
    state = [" "]
    i, n = 0, len(line)
    while i < n:
        r = line[i]
        r0 = line[i + 1] if i + 1 < n else _EMPTY
        s = state[-1]
        e = _golib_escape(s, r, r0)
        nxt = i + 1
        if e is not _NOESC:
            if i + 1 < n:
                nxt = i + 2
            if e is _EMPTY:
                i = nxt
                continue
        if s == " ":
            if e is not _NOESC:
                state.append("A")
                token = [*(token or []), e]
            elif r in "\"'":
                state += ["A", r]
                token = []
            elif r not in " \t\n":
                state.append("A")
                token = [*(token or []), r]
        elif s == "A":
            assert token is not None
            if e is not _NOESC:
                token.append(e)
            elif r in "\"'":
                state.append(r)
            elif r in " \t\n":
                state.pop()
                tokens.append("".join(token))
                token = None
            else:
                token.append(r)
        else:
            assert token is not None
            if e is not _NOESC:
                token.append(e)
            elif r == s:
                state.pop()
            else:
                token.append(r)
        i = nxt
    if token is not None:
        tokens.append("".join(token))
    return tokens


def swap_sanitize(cmd: str) -> str:
    """``SanitizeCommand`` before the split: comment lines dropped, a trailing ``\\`` becomes a space."""
    lines = []
    for line in cmd.split("\n"):
        trimmed = line.strip(" \t\n\v\f\r\x85\xa0")
        if trimmed.startswith("#"):
            continue
        lines.append(trimmed[:-1] + " " if trimmed.endswith("\\") else line)
    return "\n".join(lines)


def swap_argv(text: str, name: str, port: int = 5800) -> tuple[list[str], list[str], dict]:
    """(argv, env, model entry) llama-swap would run for model ``name`` of the YAML ``text``."""
    doc = yaml.safe_load(text)
    assert set(doc) == {"models"}
    entry = doc["models"][name]
    assert set(entry) <= SWAP_MODEL_KEYS and "cmd" in entry
    cmd = entry["cmd"].replace("${PORT}", str(port))
    assert "${" not in cmd  # llama-swap refuses a config with an unknown macro left
    return golib_posix_split(swap_sanitize(cmd)), list(entry.get("env") or []), entry


# --------------------------------------------------------------------------- Ollama's reading

_VALID = {"from", "license", "template", "system", "adapter", "draft", "renderer", "parser", "parameter", "message",
          "requires"}
_NIL, _NAME, _VALUE, _PARAMETER, _MESSAGE, _COMMENT = range(6)


def _ollama_unquote(s: str) -> tuple[str, bool]:
    if s[:3] == '"""':
        return (s[3:-3], True) if len(s) >= 6 and s[-3:] == '"""' else ("", False)
    if s[:1] == '"':
        return (s[1:-1], True) if len(s) >= 2 and s[-1] == '"' else ("", False)
    return s, True


def _ollama_rune(r: str, cs: int) -> tuple[int, str | None]:
    space, newline = r in " \t", r in "\r\n"
    if cs == _NIL:
        return (_COMMENT, None) if r == "#" else ((_NIL, None) if space or newline else (_NAME, r))
    if cs == _NAME:
        if r.isascii() and r.isalpha():
            return _NAME, r
        if space:
            return _VALUE, None
        raise ValueError("command must be one of ...")
    if cs == _VALUE:
        return (_NIL, r) if newline or space else (_VALUE, r)
    if cs == _PARAMETER:
        if (r.isascii() and r.isalnum()) or r == "_":
            return _PARAMETER, r
        if space:
            return _VALUE, None
        raise ValueError("unexpected EOF")
    if cs == _MESSAGE:
        if r.isascii() and r.isalpha():
            return _MESSAGE, r
        if space:
            return _VALUE, None
        raise ValueError("unexpected EOF")
    return (_NIL, None) if newline else (_COMMENT, None)


def ollama_parse(text: str) -> list[tuple[str, str]]:
    """``parser.ParseFile`` of Ollama: its commands as (name, args); ``FROM`` is ``model``."""
    cmds: list[tuple[str, str]] = []
    name = ""
    curr = _NIL
    b: list[str] = []
    for r in text:
        nxt, rr = _ollama_rune(r, curr)
        if nxt != curr:
            if curr == _NAME:
                word = "".join(b)
                if word.lower() not in _VALID:
                    raise ValueError("command must be one of ...")
                s = word.lower()
                if s == "from":
                    name = "model"
                elif s == "parameter":
                    nxt = _PARAMETER
                else:
                    name = s
                    if s == "message":
                        nxt = _MESSAGE
            elif curr == _PARAMETER:
                name = "".join(b)
            elif curr == _VALUE:
                value, ok = _ollama_unquote("".join(b).strip())
                if not ok or r in " \t":
                    b.append(r)
                    continue
                cmds.append((name, value))
            b = []
            curr = nxt
        if rr is not None and rr.isprintable():
            b.append(rr)
    if curr == _VALUE:
        value, ok = _ollama_unquote("".join(b).strip())
        if not ok:
            raise ValueError("unexpected EOF")
        cmds.append((name, value))
    elif curr not in (_NIL, _COMMENT):
        raise ValueError("unexpected EOF")
    assert any(c[0] == "model" for c in cmds), "no FROM line"
    return cmds


# --------------------------------------------------------------------------- the tests

ARGV = ["/opt/llama/llama-server", "-m", "/models/Qwen3 30B it's.gguf", "-dev", "CUDA0,CUDA1", "-ngl", "49", "-ts",
        "3,1", "-ot", r"blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_exps=CPU", "-c", "16384", "-ctk", "q8_0", "-ctv",
        "q8_0", "-fa", "on", "-np", "2", "-ub", "1024", "--fit", "off"]


def test_llama_swap_entry_reads_back_as_the_same_command():
    text = render(ARGV, "yaml", name="qwen3-30b: the A3B", env={"CUDA_VISIBLE_DEVICES": "1,0"})
    argv, env, entry = swap_argv(text, "qwen3-30b: the A3B", port=5801)
    assert argv == [*ARGV, "--port", "5801"]
    assert env == ["CUDA_VISIBLE_DEVICES=1,0"]
    assert set(entry) == {"cmd", "env"}
    assert "${PORT}" in entry["cmd"] and entry["cmd"].endswith("--port '${PORT}'\n")


def test_llama_swap_entry_keeps_odd_characters_and_refuses_what_it_cannot_pass():
    odd = ["llama-server", "-m", "/m/$HOME \"q\" 'a' \\b\\ 100% !x #c é 🦙.gguf", "-a", "# not a comment", "-a", ""]
    argv, _, _ = swap_argv(llama_swap_entry(odd, "m"), "m")
    assert argv == [*odd, "--port", "5800"]
    for bad, why in (("a\nb", "a line break"), ("a\tb", "a control character"), ("${MODEL_ID}", "macros"),
                     ("\u2028", "a line break"), ("\udcff", "not UTF-8")):
        with pytest.raises(QuoteError, match="llama-swap cannot pass"):
            llama_swap_entry(["llama-server", "-m", bad], "m")
        assert why  # (the reason each one is refused)
    with pytest.raises(QuoteError, match="the model name"):
        llama_swap_entry(["llama-server"], "${PORT}")


def test_ollama_modelfile_reads_back_line_by_line():
    text = ollama_modelfile(ARGV, n_layers_total=48)
    assert ollama_parse(text) == [("model", "/models/Qwen3 30B it's.gguf"), ("num_gpu", "49"), ("num_ctx", "16384")]
    lines = text.splitlines()
    assert lines[:3] == ["FROM /models/Qwen3 30B it's.gguf", "PARAMETER num_gpu 49", "PARAMETER num_ctx 16384"]
    comments = [ln for ln in lines if ln.startswith("#")]
    assert comments == [
        "# Ollama cannot express these parts of the Layerdeck placement:",
        "#  - tensor overrides (-ot / --n-cpu-moe / --cpu-moe): Ollama cannot place experts on the CPU while "
        "their layer is on a GPU",
        "#  - the split between GPUs (-ts 3,1): Ollama decides it itself",
        "#  - K cache type (-ctk q8_0): set through Ollama's server environment, not the Modelfile",
        "#  - V cache type (-ctv q8_0): set through Ollama's server environment, not the Modelfile",
        "#  - flash attention (-fa on): set through Ollama's server environment, not the Modelfile",
        "#  - parallel slots (-np 2): set through Ollama's server environment, not the Modelfile",
        "#  - micro-batch size (-ub 1024): set through Ollama's server environment, not the Modelfile",
    ]


@pytest.mark.parametrize("ngl,ctx,params", [
    ("all", "0", [("num_gpu", "49")]),       # every layer and the output; -c 0 is the model's own: Ollama's too
    ("-2", "4096", [("num_gpu", "49"), ("num_ctx", "4096")]),
    ("auto", None, []),                       # Ollama decides
    ("0", "512", [("num_gpu", "0"), ("num_ctx", "512")]),
])
def test_ollama_parameters_are_numbers_ollama_accepts(ngl, ctx, params):
    argv = ["llama-server", "-m", "/m/x.gguf", "-ngl", ngl] + (["-c", ctx] if ctx else [])
    assert ollama_parse(ollama_modelfile(argv, 48)) == [("model", "/m/x.gguf"), *params]


@pytest.mark.parametrize("path", [" lead.gguf", "trail.gguf ", '"quoted".gguf', "a\nb.gguf", 'a"\nb.gguf',
                                  "tab\there.gguf", "~user/x.gguf", "# not a comment.gguf", "C:\\m\\x.gguf"])
def test_ollama_from_carries_awkward_paths(path):
    (name, value), *_ = ollama_parse(ollama_modelfile(["llama-server", "-m", path], 1))
    assert name == "model" and value == ("./" + path if path.startswith("~") else path)


def test_ollama_env_and_missing_model():
    text = ollama_modelfile(["llama-server", "-m", "/m/x.gguf"], 1, env={"CUDA_VISIBLE_DEVICES": "1,0"})
    assert "#  - the environment variable CUDA_VISIBLE_DEVICES=1,0: set it for the Ollama server" in text
    with pytest.raises(QuoteError, match="no -m MODEL"):
        ollama_modelfile(["llama-server"], 1)
