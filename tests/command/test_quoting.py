"""Round trips for the shell quoters: a real bash for POSIX, documented parser models for PowerShell and cmd.exe."""

from __future__ import annotations

import random
import shlex
import shutil
import subprocess
import textwrap

import pytest

from app.command.shells import (
    CommandSyntaxError,
    parse_cmd_command,
    parse_posix_command,
    parse_powershell_command,
    parse_windows_cmdline,
    powershell_legacy_cmdline,
    quote_cmd,
    quote_posix,
    quote_posix_word,
    quote_powershell,
    split_posix,
    windows_argv_to_cmdline,
    windows_quote_arg,
)
from app.command.shells import powershell as q

REGEX = r"blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_exps\.=CPU"

NASTY = [
    r"C:\Program Files\llama.cpp\llama-server.exe",
    "/home/u/my models/Qwen3 30B-A3B Q4_K_M.gguf",
    "it's", 'say "hi"', "both ' and \"", "$HOME", "${HOME}/x", "`id`", "$(id)", "%PATH%", "50%", "%", "%%",
    "%~dp0", "%1", "!", "x!y", "!!", "!PATH!", "^", "^^", "a^b", "^%", "%^", "&", "a&b", "&&", "|", "a|b", "<>",
    "<in", ">out", "2>&1", "()", "(a)", ")", ";", "a;b", "模型 ü.gguf", "🦙 emoji 🦙", "", " ", "  two  spaces ",
    "\t", "tab\there", r"C:\dir" + "\\", r"C:\my dir" + "\\", "\\", "\\\\", 'a\\"b', 'a\\\\"b', '\\"', '"', '""',
    '"quoted"', "'", "''", REGEX, "-m", "--ctx-size", "-1", "--", "--%", "-", "=", "=x", "a=b", "LLAMA_ARG_X=1",
    "~", "~/x", "*", "*.gguf", "?", "[a]", "{a,b}", "#comment", "a #b", "\u00a0nbsp", "\u2018smart\u2019",
    "\u201csmart\u201d", "back`tick", "a,b", "3,1", "0x10", "1kb", "007", "0.7", "@", "@(a)", "#", "$",
    r"\\server\share\model.gguf", "a\nb", "\n", "line1\r\nline2", "esc\x1b[0m", "del\x7f", "if", "then",
    "RPC0[127.0.0.1:50052]", "a'b\"c$d`e!f^g%h&i|j<k>l(m)n",
]

ALPHABET = list(" \t\"'\\$`%!^&|<>()[]{};,=*?~#@-_.:/aZ09") + ["ü", "模", "🦙", "\u2018", "\u201c", "\u00a0", "\n"]


def _random_args(rng: random.Random, *, newlines: bool = True) -> list[str]:
    alphabet = ALPHABET if newlines else [c for c in ALPHABET if c != "\n"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(1, 6))]


def _cases(*, newlines: bool = True) -> list[list[str]]:
    nasty = [a for a in NASTY if newlines or not any(c in a for c in "\r\n")]
    rng = random.Random(20261129)
    cases = [nasty] + [[a] for a in nasty]
    cases += [_random_args(rng, newlines=newlines) for _ in range(300 - len(cases))]
    return cases


CASES = _cases()
CASES_NO_NEWLINE = _cases(newlines=False)


# --------------------------------------------------------------------------- bash

_BASH = shutil.which("bash")


def _run_shell(shell: list[str], script: str) -> list[list[str]]:
    """Run ``script`` (lines calling ``f ARGS``); ``f`` prints its argument count and arguments NUL-separated."""
    proc = subprocess.run(shell, input=script.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    fields = proc.stdout.decode().split("\0")
    out, k = [], 0
    while k < len(fields) - 1:
        count = int(fields[k])
        out.append(fields[k + 1:k + 1 + count])
        k += 1 + count
    return out


@pytest.mark.skipif(_BASH is None, reason="bash not installed")
@pytest.mark.parametrize("multiline", [False, True])
def test_bash_receives_exact_argv(multiline):
    script = "f() { printf '%s\\0' \"$#\" \"$@\"; }\n"
    script += "\n".join(quote_posix(["f", *argv], multiline=multiline) for argv in CASES) + "\n"
    got = _run_shell([_BASH, "--norc", "--noprofile", "-s"], script)
    assert len(got) == len(CASES)
    for argv, seen in zip(CASES, got, strict=True):
        assert seen == argv


@pytest.mark.skipif(_BASH is None, reason="bash not installed")
def test_bash_with_history_expansion_on_as_in_an_interactive_shell():
    """Interactive bash expands ``!`` inside double quotes; the quoter never puts one there."""
    script = "set -o history; set -H\nf() { printf '%s\\0' \"$#\" \"$@\"; }\n"
    script += "\n".join(quote_posix(["f", *argv]) for argv in CASES) + "\n"
    got = _run_shell([_BASH, "--norc", "--noprofile", "-s"], script)
    assert got == CASES


@pytest.mark.skipif(_BASH is None, reason="bash not installed")
def test_bash_program_path_and_env_prefix(tmp_path):
    prog = tmp_path / "arg dump a=b 'q' ü"
    prog.write_text("#!/bin/sh\nprintf '%s\\0' \"$LLAMA_ARG_CTX_SIZE\" \"$ODD\" \"$@\"\n")
    prog.chmod(0o755)
    argv = [str(prog), "-m", "x y", "it's", "$HOME"]
    env = {"LLAMA_ARG_CTX_SIZE": "4096", "ODD": "a b'c$d\n!"}
    for multiline in (False, True):
        text = quote_posix(argv, env=env, multiline=multiline)
        proc = subprocess.run([_BASH, "--norc", "--noprofile", "-c", text], capture_output=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.decode().split("\0")[:-1] == [env["LLAMA_ARG_CTX_SIZE"], env["ODD"], *argv[1:]]
        assert parse_posix_command(text) == (env, argv)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed")
def test_zsh_receives_exact_argv():
    script = "f() { printf '%s\\0' \"$#\" \"$@\"; }\n"
    script += "\n".join(quote_posix(["f", *argv]) for argv in CASES) + "\n"
    assert _run_shell([shutil.which("zsh"), "-f", "-s"], script) == CASES


def test_posix_output_is_readable():
    assert quote_posix(["llama-server", "-m", "/m/a.gguf", "-c", "4096", "-ot", REGEX]) == (
        "llama-server -m /m/a.gguf -c 4096 -ot 'blk\\.(1[0-9]|2[0-3])\\.ffn_(up|gate|down)_exps\\.=CPU'")
    assert quote_posix_word("it's") == '"it\'s"'
    assert quote_posix_word("it's $5") == "'it'\\''s $5'"
    assert quote_posix_word("'$x'") == "\\''$x'\\'"
    assert quote_posix_word("") == "''"
    assert quote_posix_word("a\tb\n") == "$'a\\tb\\n'"
    assert quote_posix_word("=x") == "'=x'"  # zsh would expand =x
    assert quote_posix_word("a=b") == "a=b"
    assert quote_posix_word("a=b", command=True) == "'a=b'"
    assert quote_posix_word("if", command=True) == "'if'"
    assert quote_posix(["p"], env={"A": "1"}) == "A=1 p"
    assert quote_posix(["p", "-m", "x", "-c", "1"], multiline=True) == "p \\\n  -m x \\\n  -c 1"


@pytest.mark.parametrize("argv", CASES)
def test_posix_round_trip_through_our_parser(argv):
    text = quote_posix(argv)
    assert split_posix(text) == argv
    assert parse_posix_command(text) == ({}, argv)
    if not any(ord(c) < 32 or ord(c) == 127 for a in argv for c in a):  # shlex does not read $'...'
        assert shlex.split(text) == argv


def test_posix_parser_reads_pasted_commands():
    text = "FOO=1 BAR='x y' ./llama-server \\\n  -m \"/m/a b.gguf\" \\\n  -ngl 99 # comment\n"
    assert parse_posix_command(text) == ({"FOO": "1", "BAR": "x y"}, ["./llama-server", "-m", "/m/a b.gguf", "-ngl", "99"])
    assert parse_posix_command("export A=1; export B='2 3'\nllama-server -c 4096") == (
        {"A": "1", "B": "2 3"}, ["llama-server", "-c", "4096"])
    assert parse_posix_command("export A=1 && env B=2 llama-server") == ({"A": "1", "B": "2"}, ["llama-server"])
    assert parse_posix_command("X=1; llama-server") == ({}, ["llama-server"])  # not exported
    assert parse_posix_command("'A=1' prog") == ({}, ["A=1", "prog"])
    assert parse_posix_command("A\\=1 prog") == ({}, ["A=1", "prog"])
    assert parse_posix_command("p $'a\\tb\\x41\\u00fc\\101' \"a\\$b\\\\c\\d\"") == ({}, ["p", "a\tbAüA", "a$b\\c\\d"])
    assert split_posix("p a\\ b \"c\\\nd\"") == ["p", "a b", "cd"]
    assert split_posix("p $HOME ~/x *.gguf") == ["p", "$HOME", "~/x", "*.gguf"]  # no expansion
    for bad in ("a | b", "a > f", "a $(id)", "a `id`", "a; b", "a && b", "a {x,y}", "'open", '"open', "a &"):
        with pytest.raises(CommandSyntaxError):
            split_posix(bad)
    for bad in ("a; b", "A=1", "", "p | q", "env -i p"):
        with pytest.raises(CommandSyntaxError):
            parse_posix_command(bad)


# --------------------------------------------------------------------------- Windows C runtime

# Microsoft's table ("Parsing C command-line arguments", main function docs), post-2008 runtime.
MS_EXAMPLES = [
    ('"a b c" d e', ["a b c", "d", "e"]),
    (r'"ab\"c" "\\" d', ['ab"c', "\\", "d"]),
    (r'a\\\b d"e f"g h', [r"a\\\b", "de fg", "h"]),
    (r'a\\\"b c d', [r'a\"b', "c", "d"]),
    (r'a\\\\"b c" d e', [r"a\\b c", "d", "e"]),
    ('a"b"" c d', ['ab" c d']),
]


@pytest.mark.parametrize("line,expected", MS_EXAMPLES)
def test_parse_windows_cmdline_matches_microsoft_examples(line, expected):
    assert parse_windows_cmdline(line) == expected


def test_parse_windows_cmdline_details():
    assert parse_windows_cmdline('a"b"" c d', post2008=False) == ['ab"', "c", "d"]
    assert parse_windows_cmdline('""') == [""]
    assert parse_windows_cmdline('a "" b') == ["a", "", "b"]
    assert parse_windows_cmdline("  a\t\tb  ") == ["a", "b"]
    assert parse_windows_cmdline('"unterminated a') == ["unterminated a"]
    assert parse_windows_cmdline("a\nb") == ["a\nb"]  # only space and tab separate
    assert parse_windows_cmdline(r'"C:\Program Files\x\" a', first_is_program=True) == ["C:\\Program Files\\x\\", "a"]
    assert parse_windows_cmdline(r'C:\a"b c"\d.exe x', first_is_program=True) == [r"C:\ab c\d.exe", "x"]
    assert parse_windows_cmdline("") == []


@pytest.mark.parametrize("argv", CASES)
def test_windows_cmdline_round_trip_and_list2cmdline_agreement(argv):
    line = windows_argv_to_cmdline(argv)
    assert parse_windows_cmdline(line) == argv
    assert line == subprocess.list2cmdline(argv)  # the stdlib agrees on every case here
    for a in argv:
        assert parse_windows_cmdline(windows_quote_arg(a)) == [a]


# --------------------------------------------------------------------------- PowerShell


def test_powershell_output_is_readable():
    argv = [r"C:\llama\llama-server.exe", "-m", r"C:\my models\a.gguf", "-c", "4096", "-ot", REGEX, "", "it's"]
    assert quote_powershell(argv) == (
        r"& 'C:\llama\llama-server.exe' -m 'C:\my models\a.gguf' -c 4096 -ot "
        r"'blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_exps\.=CPU' '' 'it''s'")
    assert quote_powershell(["p", 'say "hi"', "", r"C:\my dir" + "\\", "a b"], legacy=True) == (
        "& 'p' '\"say \\\"hi\\\"\"' '\"\"' '\"C:\\my dir\\\\\"' 'a b'")
    assert quote_powershell(["p", "--%"]) == "& 'p' @('--%')"
    assert quote_powershell(["p", "a\tb"]) == "& 'p' \"a`tb\""
    assert quote_powershell(["p", "\u2019"]) == "& 'p' '\u2019\u2019'"
    assert quote_powershell(["p", "-m", "x"], env={"LLAMA_ARG_N_PARALLEL": "1"}) == (
        "$env:LLAMA_ARG_N_PARALLEL = '1'; & 'p' -m x")
    assert quote_powershell(["p", "-m", "x"], env={"A": "1"}, multiline=True) == "$env:A = '1'\n& 'p' `\n  -m x"


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("multiline", [False, True])
def test_powershell_round_trip(legacy, multiline):
    for argv in CASES:
        text = quote_powershell(argv, legacy=legacy, multiline=multiline)
        assert parse_powershell_command(text, legacy=legacy) == ({}, argv), text


def test_powershell_legacy_text_also_survives_windows_powershell_51():
    """5.1 does not double trailing backslashes when it adds quotes; the legacy text never lets it add them to one."""
    for argv in CASES:
        text = quote_powershell(argv, legacy=True)
        values = parse_powershell_command(text)[1][1:]  # the strings PowerShell holds
        for a, v in zip(argv[1:], values, strict=True):
            assert not (q._ps_need_quotes(v) and v.endswith("\\")), (a, v)
        line = powershell_legacy_cmdline(values, double_trailing_backslashes=False)
        assert parse_windows_cmdline(line) == argv[1:]


def test_powershell_legacy_model_reproduces_known_bugs():
    """PowerShell issue #1995: legacy passing mangles embedded quotes, drops '' and breaks 'dir\\ with space\\'."""
    assert parse_powershell_command("& p 'a\"b c'", legacy=True)[1] == ["p", "ab c"]
    assert parse_powershell_command("& p '{\"k\": 1}'", legacy=True)[1] == ["p", "{k: 1}"]  # JSON quotes vanish
    assert parse_powershell_command("& p '' x", legacy=True)[1] == ["p", "x"]
    assert parse_powershell_command("& p 'a b'", legacy=True)[1] == ["p", "a b"]
    assert parse_windows_cmdline(powershell_legacy_cmdline([r"C:\my dir" + "\\"], double_trailing_backslashes=False)) \
        == ['C:\\my dir"']
    # and the same texts in Standard mode are passed as written
    assert parse_powershell_command("& p 'a\"b c' ''")[1] == ["p", 'a"b c', ""]
    # the legacy spelling must not be run in Standard mode
    assert parse_powershell_command(quote_powershell(["p", 'a"b'], legacy=True))[1] == ["p", 'a\\"b']


def test_powershell_need_quotes_matches_binder_source():
    assert q._ps_need_quotes("a b")
    assert not q._ps_need_quotes('"a b"')
    assert not q._ps_need_quotes('a"b c"d')
    assert q._ps_need_quotes('"a" b')
    assert not q._ps_need_quotes('"a \\" b"')  # \" does not count as a quote
    assert q._ps_need_quotes("a\u00a0b")  # char.IsWhiteSpace
    assert not q._ps_need_quotes("ab")


def test_powershell_parser_reads_pasted_commands():
    text = textwrap.dedent("""\
        $env:LLAMA_ARG_CTX_SIZE = '4096'; ${env:B}="x`ty"
        # a comment
        & "C:\\llama\\llama-server.exe" `
          -m 'C:\\my models\\a.gguf' `
          -ot "blk\\.0\\.=CPU" <# inline #> -np 1 it`'s a"b c"d 'e''f'
        """)
    env, argv = parse_powershell_command(text)
    assert env == {"LLAMA_ARG_CTX_SIZE": "4096", "B": "x\ty"}
    assert argv == ["C:\\llama\\llama-server.exe", "-m", "C:\\my models\\a.gguf", "-ot", "blk\\.0\\.=CPU",
                    "-np", "1", "it's", "ab cd", "e'f"]
    assert parse_powershell_command("llama-server -m x")[1] == ["llama-server", "-m", "x"]
    assert parse_powershell_command("& p 'a'b")[1] == ["p", "a", "b"]  # a quoted token ends at its quote
    assert parse_powershell_command("& p \u201ca\u201d \u2018b\u2019")[1] == ["p", "a", "b"]
    assert parse_powershell_command("& p `\n  -x 1")[1] == ["p", "-x", "1"]
    assert parse_powershell_command("& p ` \n  -x 1")[1] == ["p", "-x", "1"]  # lenient: blanks after the backtick
    assert parse_powershell_command("& p $ '$x'")[1] == ["p", "$", "$x"]
    for bad in ("& p $x", "& p \"$x\"", "& p \"$(id)\"", "& p | Out-Null", "& p > f", "& p --% a b", "& p (1)",
                "& p; & q", "$env:A = x", "& $p", "'open", "& p @('a' 'b')", ""):
        with pytest.raises(CommandSyntaxError):
            parse_powershell_command(bad)


# --------------------------------------------------------------------------- cmd.exe


def _adversarial_environ(argv: list[str]) -> dict[str, str]:
    """A variable for every name that could sit between two % (or !) in the arguments, so a leak shows.

    Names starting with '^' are left out: the interactive-prompt encoding
    relies on no variable name starting with a caret.
    """
    joined = " ".join(argv)
    names = {"PATH", "HOME", "X", "A", ""}
    for mark in "%!":
        pos = [i for i, c in enumerate(joined) if c == mark]
        for x, i in enumerate(pos):
            for j in pos[x + 1:x + 4]:
                names.add(joined[i + 1:j].split(":", 1)[0])
    return {n: "\x01LEAK\x01" for n in names if n and not n.startswith("^")}


@pytest.mark.parametrize("batch_file", [False, True])
@pytest.mark.parametrize("delayed", [False, True])
@pytest.mark.parametrize("multiline", [False, True])
def test_cmd_round_trip(batch_file, delayed, multiline):
    for argv in CASES_NO_NEWLINE:
        argv = ["C:\\llama dir\\llama-server.exe", *argv]
        text = quote_cmd(argv, batch_file=batch_file, delayed_expansion=delayed, multiline=multiline)
        environ = _adversarial_environ(argv)
        got = parse_cmd_command(text, batch_file=batch_file, delayed_expansion=delayed, environ=environ)
        assert got == ({}, argv), text


@pytest.mark.parametrize("batch_file", [False, True])
@pytest.mark.parametrize("delayed", [False, True])
def test_cmd_env_round_trip(batch_file, delayed):
    env = {"LLAMA_ARG_CTX_SIZE": "4096", "B": 'x "y" & z % %PATH% ! ^ 50%', "C": "100%"}
    argv = ["llama-server.exe", "-m", "a b"]
    text = quote_cmd(argv, env=env, batch_file=batch_file, delayed_expansion=delayed)
    assert parse_cmd_command(text, batch_file=batch_file, delayed_expansion=delayed,
                             environ=_adversarial_environ(list(env.values()))) == (env, argv)


def test_cmd_output_is_readable():
    argv = [r"C:\llama\llama-server.exe", "-m", r"C:\my models\a.gguf", "-c", "4096", "-ot", REGEX, ""]
    assert quote_cmd(argv) == (r'C:\llama\llama-server.exe -m "C:\my models\a.gguf" -c 4096 -ot '
                               r'"blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_exps\.=CPU" ""')
    assert quote_cmd(["p", "50%"]) == "p 50%"
    assert quote_cmd(["p", "%PATH%", "x"]) == "p %^PATH%^ x"
    assert quote_cmd(["p", "%PATH%"], batch_file=True) == "p %%PATH%%"
    assert quote_cmd(["p", "a & b 100%"]) == 'p ^"a ^& b 100%^"'
    assert quote_cmd(["p", "a & b 100%"], batch_file=True) == 'p "a & b 100%%"'
    assert quote_cmd(["p", "Hi!"], delayed_expansion=True) == "p Hi^^!"
    assert quote_cmd(["p", "Hi there!"], delayed_expansion=True) == 'p "Hi there^!"'
    assert quote_cmd(["p", 'say "hi" & go']) == 'p "say \\"hi\\" & go"'
    assert quote_cmd(["C:\\Program Files\\x.exe"]) == '"C:\\Program Files\\x.exe"'
    assert quote_cmd(["p", "-a", "1"], env={"A": "x&y"}) == "set A=x^&y\np -a 1"


def test_cmd_percent_at_the_prompt_is_never_inside_quotes():
    text = quote_cmd(["p", "a b %PATH% c"])
    assert text == 'p ^"a b %^PATH%^ c^"'
    env, argv = parse_cmd_command(text, environ={"PATH": "LEAK"})
    assert argv == ["p", "a b %PATH% c"]


def test_cmd_parser_model_matches_documented_behaviour():
    assert parse_cmd_command("prog %FOO% %BAR%", environ={"foo": "x"})[1] == ["prog", "x", "%BAR%"]
    assert parse_cmd_command("prog %%FOO%% %FOO%", batch_file=True, environ={"FOO": "x"})[1] == ["prog", "%FOO%", "x"]
    assert parse_cmd_command("prog %UNDEF%", batch_file=True, environ={})[1] == ["prog"]
    assert parse_cmd_command('prog "a & b" c^&d ^"e f^" ^(x^)')[1] == ["prog", "a & b", "c&d", "e f", "(x)"]
    assert parse_cmd_command('prog "Hi^!" Hi^^! !X!', delayed_expansion=True, environ={"X": "1"})[1] == [
        "prog", "Hi!", "Hi!", "1"]
    assert parse_cmd_command("prog Hi^^!")[1] == ["prog", "Hi^!"]
    assert parse_cmd_command("set A=1 && prog") == ({"A": "1 "}, ["prog"])
    assert parse_cmd_command('set "A=1" && set B=2&& prog ^\n  -x 1') == ({"A": "1", "B": "2"}, ["prog", "-x", "1"])
    assert parse_cmd_command("set A=1\nset A=\nprog") == ({}, ["prog"])
    assert parse_cmd_command('@"C:\\Program Files\\x.exe" a')[1] == ["C:\\Program Files\\x.exe", "a"]
    with pytest.raises(CommandSyntaxError):  # the classic: \" ends cmd's quotes, so & splits the line
        parse_cmd_command('prog "a\\"b & c"')
    for bad in ("prog | more", "prog > f", "prog 2>nul", "prog & other", "set /a x=1\nprog", "", "set X\nprog"):
        with pytest.raises(CommandSyntaxError):
            parse_cmd_command(bad)


def test_cmd_rejects_what_it_cannot_carry():
    for argv in (["p", "a\nb"], ["p", "a\rb"], ['"p"'], ["p", "a\x1a"]):
        with pytest.raises(ValueError):
            quote_cmd(argv)
    with pytest.raises(ValueError):
        quote_cmd(["C:\\a b\\100%\\x.exe"])
    assert quote_cmd(["C:\\a b\\100%\\x.exe"], batch_file=True) == '"C:\\a b\\100%%\\x.exe"'
    with pytest.raises(ValueError):
        quote_cmd(["p!"], delayed_expansion=True)
    with pytest.raises(ValueError):
        quote_cmd(["p"], env={"A": ""})


def test_all_quoters_reject_nul_and_bad_env():
    for fn in (quote_posix, quote_powershell, quote_cmd, windows_argv_to_cmdline):
        with pytest.raises(ValueError):
            fn(["p", "a\0b"])
        with pytest.raises(ValueError):
            fn([])
    for fn in (quote_posix, quote_powershell, quote_cmd):
        with pytest.raises(ValueError):
            fn(["p"], env={"1BAD": "x"})
