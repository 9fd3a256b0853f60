"""Regressions of "no crash, no hang, no silent wrong answer" for llama.cpp argument lists and pasted commands.

Each case failed before (a hang, gigabytes, a traceback, or an answer llama.cpp would not give); each now
ends in a result equal to llama.cpp's or in a typed error with llama.cpp's own message.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import time
import tracemalloc

import pytest

from app.cli import main as cli_main
from app.command.argv import MASK, mask_env, mask_secrets
from app.command.formats import render
from app.command.parse import ArgsError, parse_llama_args
from app.command.shells import QuoteError, parse_cmd_command, parse_posix_command, quote_cmd, quote_posix
from app.command.values import MAX_LAYERS, check_settings
from app.errors import LayerdeckError
from app.memory.device_adapter import parse_device_spec
from app.memory.layout import PlacementError
from app.memory.settings import LlamaSettings
from app.placement import Placement
from app.session import Session
from tests.gguf_factory import write_tiny_model

DEVICES = "CUDA0=8192,CUDA1=8192"


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    return write_tiny_model("qwen3moe", tmp_path_factory.mktemp("hostile") / "moe.gguf")


@pytest.fixture
def session(moe):
    return Session.open(moe, parse_device_spec(DEVICES))


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- 1. catastrophic -ot patterns


@pytest.mark.parametrize("door", ["import", "estimate", "canonical"])
def test_catastrophic_ot_pattern_is_a_typed_error_quickly(moe, door):
    t0 = time.monotonic()
    code, out, err = cli(door, "--devices", DEVICES, "--", "-m", str(moe), "-ot", "(.+)+X$=CPU")
    assert time.monotonic() - t0 < 5
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("layerdeck: the override pattern '(.+)+X$' repeats (+) something that can match in more "
                          "than one way (like (.+)+, (a|ab)* or a**): llama.cpp's std::regex backtracks exponentially")


def test_catastrophic_pattern_in_a_pasted_environment_variable(session):
    for text in ("LLAMA_ARG_OVERRIDE_TENSOR='(.+)+X$=CPU' llama-server -m x.gguf",
                 "$env:LLAMA_ARG_OVERRIDE_TENSOR = '(.+)+X$=CPU'\n& llama-server -m x.gguf",
                 "set LLAMA_ARG_OVERRIDE_TENSOR=(.+)+X$=CPU\nllama-server -m x.gguf"):
        t0 = time.monotonic()
        with pytest.raises(PlacementError, match="llama-server would hang loading the model"):
            session.import_command(text)
        assert time.monotonic() - t0 < 5
    assert session.undo_label is None  # nothing was imported


# --------------------------------------------------------------------------- 2. unbounded numbers


@pytest.mark.parametrize("args,message", [
    (["-c", "9223372036854775808"], "-c '9223372036854775808': out of range: llama.cpp reads a 32-bit number "
                                    "(-2147483648 to 2147483647) and stops with \"error while handling argument -c: stoi\"."),
    (["-c", "-5"], "-c -5: must be 0 or more (llama.cpp reads it as an unsigned size)."),
    (["-np", "1000000000"], "-np 1000000000: llama.cpp allows at most 256 parallel sequences (\"n_seq_max must be <= 256\")."),
    (["-np", "0"], "-np 0: invalid value for n_parallel (use -np -1 for auto, or a number of slots)."),
    (["-ts", "nan,1"], "-ts 'nan,1': nan is not a proportion; use numbers like 3,1."),
    (["-ts", "inf"], "-ts 'inf': inf is not a proportion; use numbers like 3,1."),
    (["-ts", "-1,2"], "-ts '-1,2': proportions must be 0 or more, got -1."),
    (["-ts", "1e308,1e308"], "-ts '1e308,1e308': 1e308 is out of range for llama.cpp (a float, at most 3.40282e+38)."),
    (["-ts", "3e38,3e38"], "-ts '3e38,3e38': the proportions add up to more than a float holds; use smaller numbers."),
    (["-ts", ",3,1"], "-ts expects proportions like 3,1, got ',3,1'."),
    (["-ts", ",".join(["1"] * 16)], "-ts: got 16 input configs, but system only has 16 devices (llama.cpp takes at most 15 proportions)."),
    (["-ncmoe", "-1"], "-ncmoe -1: invalid value (a number of layers, 0 or more)."),
    (["-ncmoe", "99999999999"], "-ncmoe '99999999999': out of range: llama.cpp reads a 32-bit number "
                                "(-2147483648 to 2147483647) and stops with \"error while handling argument -ncmoe: stoi\"."),
    (["-b", "0"], "-b 0: must be 1 or more (a number of tokens)."),
    (["-ub", "-1"], "-ub -1: must be 0 or more (llama.cpp reads it as an unsigned size)."),
    (["-t", "1_000"], "-t expects a whole number, got '1_000'."),
    (["-ngl", "\u0661\u0662"], "-ngl expects a whole number, got '١٢'."),
    (["-ctk", "bogus"], "-ctk 'bogus': Unsupported cache type: bogus (allowed: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, "
                        "q5_0, q5_1)."),
])
def test_values_outside_llama_cpp_limits_are_refused_with_its_message(args, message):
    with pytest.raises(ArgsError) as e:
        parse_llama_args(["llama-server", "-m", "x.gguf", *args])
    assert str(e.value) == message


def test_values_llama_cpp_reads_are_kept_as_it_reads_them():
    s = parse_llama_args(["-ngl", "-7", "-ts", "3/1", "-np", "-5", "-c", "0", "-ub", "0", "-ts", "1e-50,0,"]).settings
    assert s.n_gpu_layers == -2  # any number below -1 is "all" in llama.cpp (llama_model::n_gpu_layers)
    assert s.tensor_split == [0.0, 0.0]  # stored as float: 1e-50 is 0, so the split follows free memory
    assert s.n_parallel == -5 and s.n_ctx == 0 and s.n_ubatch == 0
    assert parse_llama_args(["-ts", " 3,1.5e0"]).settings.tensor_split == [3.0, 1.5]
    assert parse_llama_args(["-np", "256"]).settings.n_parallel == 256


def test_huge_n_cpu_moe_is_all_layers_without_building_a_huge_list(moe):
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        big = parse_llama_args(["-m", str(moe), "-ncmoe", "2147483647"]).settings
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - t0 < 1 and peak < 2 << 20
    assert len(big.overrides) == MAX_LAYERS
    from app.model import open_model

    model = open_model(moe)
    lanes = parse_device_spec(DEVICES)
    all_layers = parse_llama_args(["-m", str(moe), "-ncmoe", str(model.params.n_layer)]).settings
    for n in ("1000000", "100000000"):
        s = parse_llama_args(["-m", str(moe), "-ncmoe", n]).settings
        assert Placement.from_settings(model, lanes, s).tensor_device == \
            Placement.from_settings(model, lanes, all_layers).tensor_device


def test_one_validation_path_for_every_front_end(moe, session):
    """import accepted a quantized V cache without flash attention that estimate refused."""
    message = ("a quantized V cache (q8_0) needs flash attention: use -fa on or -ctv f16 "
               "(llama.cpp: \"quantized V cache requires flash_attn to be enabled\").")
    for door in ("import", "estimate", "canonical"):
        code, out, err = cli(door, "--devices", DEVICES, "--", "-m", str(moe), "-ctv", "q8_0", "-fa", "off")
        assert (code, out, err) == (2, "", f"layerdeck: {message}\n"), door
    with pytest.raises(ArgsError) as e:
        session.import_command(f"llama-server -m {moe} -ctv q8_0 -fa off")
    assert str(e.value) == message
    with pytest.raises(ArgsError, match="Unsupported cache type: bogus"):
        session.import_command("LLAMA_ARG_CACHE_TYPE_K=bogus llama-server -m x.gguf")
    with pytest.raises(ArgsError, match="quantized V cache"):
        check_settings(LlamaSettings(type_v="q4_0", flash_attn="off"))  # a plan or a settings edit
    assert check_settings(LlamaSettings(type_v="q4_0", flash_attn="auto")).type_v == "q4_0"  # auto turns it on


# --------------------------------------------------------------------------- 3. file names shells cannot carry

NOT_UTF8 = os.fsdecode(b"/tmp/m\xff odel.gguf")


def test_not_utf8_path_is_quoted_byte_exact_for_bash():
    text = quote_posix(["llama-server", "-m", NOT_UTF8])
    assert text == "llama-server -m $'/tmp/m\\xff odel.gguf'"
    assert text.isascii()
    assert parse_posix_command(text) == ({}, ["llama-server", "-m", NOT_UTF8])


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_gives_the_program_the_original_bytes():
    text = quote_posix(["printf", "%s\\0", NOT_UTF8, "é"])
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", text], capture_output=True, timeout=30).stdout
    assert out == b"/tmp/m\xff odel.gguf\0" + "é".encode() + b"\0"


@pytest.mark.parametrize("fmt", ["powershell", "cmd", "cmd-batch", "yaml", "ollama"])
def test_not_utf8_path_is_a_typed_error_where_it_cannot_be_written(fmt):
    with pytest.raises(QuoteError, match="not UTF-8"):
        render(["llama-server", "-m", NOT_UTF8], fmt)


def test_canonical_with_a_strict_stdout_and_a_not_utf8_path(moe, tmp_path):
    odd = os.path.join(os.fsencode(tmp_path), b"m\xff odel.gguf")
    shutil.copy(moe, odd)
    env = dict(os.environ, PYTHONIOENCODING="utf-8:strict")
    proc = subprocess.run([sys.executable, "-m", "app.cli", "canonical", "--devices", DEVICES, "--", "-m", odd,
                           "-ngl", "3"], capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    line = proc.stdout.decode("ascii").strip()
    assert parse_posix_command(line)[1][:3] == ["llama-server", "-m", os.fsdecode(odd)]
    bad = subprocess.run([sys.executable, "-m", "app.cli", "import", "--devices", b"CUDA\xff=1", "--", "-m", odd],
                         capture_output=True, env=env, timeout=120)
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr and bad.stdout == b""


def test_newline_in_a_path_for_cmd_is_a_typed_error():
    for fmt in ("cmd", "cmd-batch"):
        with pytest.raises(QuoteError, match="cmd.exe cannot pass argument .* it contains a newline"):
            render(["llama-server.exe", "-m", "C:\\a\nb.gguf"], fmt)
    with pytest.raises(QuoteError, match="a carriage return"):
        quote_cmd(["llama-server.exe"], env={"X": "a\rb"})


def test_ollama_from_line_cannot_be_broken_by_the_path():
    from tests.command.test_formats_export import ollama_parse

    path = "/m/a\nPARAMETER num_gpu 0.gguf"
    text = render(["llama-server", "-m", path, "-ngl", "3"], "ollama")
    assert text.startswith(f'FROM "{path}"\n')
    assert ollama_parse(text) == [("model", path), ("num_gpu", "3")]
    with pytest.raises(QuoteError, match="Ollama cannot read the model path .* which Ollama's parser drops"):
        render(["llama-server", "-m", "/m/a\x1bb.gguf"], "ollama")
    text = render(["llama-server", "-m", "/m/x.gguf", "-ngl", "3", "-ctk", "q8_0\nPARAMETER num_gpu 0"], "ollama")
    assert [ln for ln in text.splitlines() if ln.startswith("PARAMETER")] == ["PARAMETER num_gpu 3"]


def test_every_format_ends_in_text_or_a_typed_error():
    hostile = ["", " ", "a\nb", "\r", "\t", "%PATH%", "!x!", "${PORT}", "${env.HOME}", "\u2028", "\x85", "\ufeff",
               "\x1b", "\x7f", '"', "'", "\\", NOT_UTF8, os.fsdecode(b"\xc3"), "\udbff", "~user/x", '"""']
    formats = ["bash", "powershell", "cmd", "cmd-batch", "yaml", "env", "ollama", "argv-json"]
    outcomes = {}
    for value in hostile:
        for fmt in formats:
            try:
                text = render(["llama-server", "-m", value, "-a", value], fmt)
                assert isinstance(text, str) and text
                outcomes[fmt, value] = "text"
            except LayerdeckError:
                outcomes[fmt, value] = "refused"
    assert outcomes["bash", NOT_UTF8] == "text" and outcomes["bash", "\udbff"] == "refused"
    assert outcomes["yaml", "${PORT}"] == "refused" and outcomes["yaml", "\u2028"] == "refused"
    assert outcomes["cmd", "%PATH%"] == "text" and outcomes["ollama", ""] == "refused"


# --------------------------------------------------------------------------- 4. saved .cmd and .sh files


def test_cmd_batch_form_doubles_percent_and_keeps_bang_literal():
    argv = ["C:\\llama\\llama-server.exe", "-m", "C:\\m 100%!\\x.gguf", "-a", "%PATH%!x!"]
    text = render(argv, "cmd-batch", env={"CUDA_VISIBLE_DEVICES": "1,0"})
    assert text.splitlines() == ["@setlocal DisableDelayedExpansion", "set CUDA_VISIBLE_DEVICES=1,0",
                                 "C:\\llama\\llama-server.exe ^", '  -m "C:\\m 100%%!\\x.gguf" ^',
                                 "  -a %%PATH%%!x!"]
    for delayed in (False, True):  # whatever the machine's default expansion is
        assert parse_cmd_command(text, batch_file=True, delayed_expansion=delayed,
                                 environ={"PATH": "P", "x": "X"}) == ({"CUDA_VISIBLE_DEVICES": "1,0"}, argv)


@pytest.mark.gui
def test_command_panel_saves_batch_files_and_runnable_scripts(moe, tmp_path, qtbot):
    from app.model import open_model
    from ui.command_panel import CommandPanel
    from ui.document import Document

    model = open_model(moe)
    doc = Document(model, parse_device_spec(DEVICES))
    panel = CommandPanel(doc, program="C:\\llama\\llama-server.exe")
    qtbot.addWidget(panel)
    panel.shell.setCurrentIndex(panel.shell.findData("cmd"))
    target = tmp_path / "run.cmd"
    panel.save_to(str(target), "cmd")
    saved = target.read_text(encoding="utf-8")
    cmd = doc.command(rpc=[], program="C:\\llama\\llama-server.exe")
    assert saved == render(cmd.argv, "cmd-batch") + "\n"
    assert saved.startswith("@setlocal DisableDelayedExpansion\n")
    assert parse_cmd_command(saved, batch_file=True)[1] == cmd.argv
    panel.shell.setCurrentIndex(panel.shell.findData("bash"))
    sh = tmp_path / "run.sh"
    panel.save_to(str(sh), "bash")
    assert sh.read_text(encoding="utf-8") == "#!/usr/bin/env bash\n" + panel.text.toPlainText() + "\n"
    assert sh.stat().st_mode & 0o777 == 0o755


# --------------------------------------------------------------------------- 5. secrets in logs


def test_mask_secrets_hides_keys_and_tokens_only():
    argv = ["llama-server", "-m", "x.gguf", "--api-key", "sk-1", "--alias", "--api-key", "--hf-token", "hf_x",
            "--api-key-file", "/k.txt", "--ssl-key-file", "/tls.key", "--api-key=sk-2", "-hft", "hf_y"]
    assert mask_secrets(argv) == ["llama-server", "-m", "x.gguf", "--api-key", MASK, "--alias", "--api-key",
                                  "--hf-token", MASK, "--api-key-file", "/k.txt", "--ssl-key-file", "/tls.key",
                                  f"--api-key={MASK}", "-hft", MASK]
    assert argv[4] == "sk-1"  # a copy
    assert mask_env({"LLAMA_API_KEY": "k", "LLAMA_ARG_API_KEY": "k", "HF_TOKEN": "t", "LLAMA_ARG_PORT": "1"}) == {
        "LLAMA_API_KEY": MASK, "LLAMA_ARG_API_KEY": MASK, "HF_TOKEN": MASK, "LLAMA_ARG_PORT": "1"}


def test_the_launch_log_never_shows_the_api_key():
    from app.launch.process import ServerProcess, State

    sp = ServerProcess([sys.executable, "-c", "import sys; sys.exit(3)", "--api-key", "sk-secret-123"],
                       check_rpc=False, poll_interval=0.05)
    sp.start()
    sp._wait_for((State.FAILED, State.STOPPED), 20)
    notes = [ln.text for ln in sp.log.lines() if ln.stream == "layerdeck"]
    assert any(n.startswith("starting: ") and f"--api-key {MASK}" in n for n in notes), notes
    assert not any("sk-secret-123" in ln.text for ln in sp.log.lines())
    assert sp.api_key == "sk-secret-123"  # the client still authenticates with it
