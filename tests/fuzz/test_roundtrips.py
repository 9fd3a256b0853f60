"""Property tests: what Layerdeck writes, read back, means the same thing.

- a random placement (random moves of blocks and expert parts of a tiny MoE model on two planned devices)
  -> its command -> import -> the same device for every tensor;
- a random valid llama.cpp command -> ``layerdeck canonical`` -> the same device for every tensor by the
  estimator's placement rules (and, for a few, by a real ``llama-server -lv 5``: marked ``llama``);
- a random hostile path (spaces, quotes, ``$ % ! ^ &``, unicode, backslashes, bytes that are not UTF-8)
  -> each shell format -> the same argv: bash for real (an argument list, no shell string of ours), zsh
  when installed, PowerShell and cmd.exe through the parser models of :mod:`app.command.shells`, the
  llama-swap YAML through PyYAML and a model of llama-swap's command splitter, the Ollama ``FROM`` line
  through a model of Ollama's Modelfile parser. A format that cannot carry the path says so with a
  :class:`~app.command.shells.QuoteError`.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import subprocess

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from app.cli import main as cli_main
from app.command.formats import render
from app.command.parse import parse_llama_args
from app.command.shells import (
    QuoteError,
    parse_cmd_command,
    parse_posix_command,
    parse_powershell_command,
    quote_cmd,
    quote_posix,
    quote_powershell,
)
from app.lanes import CPU
from app.memory.device_adapter import parse_device_spec
from app.model import Role, open_model
from app.placement import Placement
from app.placement.command import build_command
from app.placement.export import InexpressibleError
from app.session import Session
from tests.command.test_formats_export import golib_posix_split, ollama_parse, swap_sanitize
from tests.gguf_factory import write_tiny_model

DEVICES = "CUDA0=8192,CUDA1=8192"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return str(write_tiny_model("qwen3moe", tmp_path_factory.mktemp("roundtrip") / "moe.gguf"))


@pytest.fixture(scope="module")
def model(model_path):
    return open_model(model_path)


def _items(model) -> list[str]:
    out = []
    for b in model.blocks:
        if b.nextn:
            continue
        out.append(b.id)
        if b.role is Role.EXPERTS:
            out += [f"{b.id}:{part}" for part in b.parts]
    return out


# --------------------------------------------------------------------------- placement -> command -> placement


@given(moves=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["CUDA0", "CUDA1", CPU])), max_size=12))
@example(moves=[(3, CPU), (7, "CUDA1")])
def test_a_random_placement_survives_export_and_import(moves, model, model_path):
    session = Session(model, parse_device_spec(DEVICES))
    items = _items(model)
    for k, lane in moves:
        session.move([items[k % len(items)]], lane)  # refused moves (llama.cpp cannot say them) change nothing
    try:
        cmd = session.command()
    except InexpressibleError as exc:
        assert "internal check failed" not in str(exc)
        return
    text = quote_posix(cmd.argv, env=cmd.env or None)
    env, argv = parse_posix_command(text)
    parsed = parse_llama_args(argv, env=env)
    back = Placement.from_settings(model, session.devices, parsed.settings)
    assert back.tensor_device == session.placement.tensor_device
    assert back.layer_device == session.placement.layer_device


# --------------------------------------------------------------------------- command -> canonical -> same placement

OT_CHOICES = [r"exps=CPU", r"blk\.[0-2]\.ffn_(up|down)_exps=CPU", r"blk\.(1|3)\.ffn_gate_exps=CUDA1",
              r"\.ffn_(up|down|gate|gate_up)_(ch|)exps=CUDA0", r"^blk\.2\.attn=CPU", r"output=CUDA0",
              r"blk\.\d+\.ffn_down_exps=CPU", r"[[:digit:]]\.ffn_up=CUDA1", r"token_embd=CUDA1"]


@st.composite
def valid_command(draw, devices: tuple[str, ...] = ("CUDA0", "CUDA1"), bufts: tuple[str, ...] = ("CUDA0", "CUDA1")):
    args: list[str] = []
    if draw(st.booleans()):
        args += ["-dev", ",".join(draw(st.permutations(devices))[: draw(st.integers(1, len(devices)))])]
    args += ["-ngl", draw(st.sampled_from(["all", "auto", "0", "1", "3", "4", "5", "99", "-5"]))]
    if draw(st.booleans()):
        args += ["-ts", ",".join(str(draw(st.integers(0, 5))) for _ in devices)]
    for _ in range(draw(st.integers(0, 3))):
        ot = draw(st.sampled_from(OT_CHOICES))
        for i, b in enumerate(bufts):
            ot = ot.replace(f"CUDA{i}", b)
        args += ["-ot", ot]
    if draw(st.booleans()):
        args += ["-ncmoe", draw(st.sampled_from(["0", "1", "2", "3", "1000000"]))]
    if draw(st.integers(0, 3)) == 0:
        args.append("-cmoe")
    if draw(st.booleans()):
        args += ["-sm", draw(st.sampled_from(["layer", "none"])), "-mg", draw(st.sampled_from(["0", "1"]))]
    return args + ["--fit", "off"]


def _canonical(model_path: str, args: list[str], devices: str = DEVICES) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["canonical", "--devices", devices, "--", "-m", model_path, *args])
    assert code == 0, err.getvalue()
    return parse_posix_command(out.getvalue().strip())[1]


@given(args=valid_command())
@example(args=["-ngl", "all", "-ts", "3,1", "-ncmoe", "1000000", "--fit", "off"])
@example(args=["-ngl", "-5", "-ot", r"[[:digit:]]\.ffn_up=CUDA1", "--fit", "off"])
def test_canonical_places_every_tensor_where_the_command_does(args, model, model_path):
    from app.memory.layout import PlacementError

    lanes = parse_device_spec(DEVICES)
    try:
        mine = Placement.from_settings(model, lanes, parse_llama_args(["-m", model_path, *args]).settings)
    except PlacementError as exc:  # llama.cpp refuses to load it (-sm none -mg past the devices): said, typed
        assert "refuses to load" in str(exc), exc
        return
    try:
        canon = _canonical(model_path, args)
    except AssertionError as exc:
        assert "cannot" in str(exc)  # llama.cpp cannot express it (a typed refusal), never a traceback
        return
    theirs = Placement.from_settings(model, lanes, parse_llama_args(canon).settings)
    assert theirs.tensor_device == mine.tensor_device
    assert theirs.layer_device == mine.layer_device


@pytest.mark.llama
@pytest.mark.slow
def test_random_commands_and_their_canonical_form_on_a_real_llama_server(model_path, model, rpc_servers,
                                                                        llama_server, llama_bin):
    """Four random valid commands: llama-server puts every tensor where Layerdeck predicts, and the canonical
    command puts every tensor in the same place (``-lv 5`` logs; the helpers of test_llama_placement)."""
    from tests.memory.accuracy import list_rpc_devices
    from tests.placement.test_llama_placement import actual_devices

    servers = rpc_servers(2)
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    names = tuple(d.name for d in devices)
    bufts = tuple(d.buft for d in devices)
    buft_to_dev = {d.buft: d.name for d in devices}
    rng = random.Random(20261201)
    cases = [_seeded_command(rng, names, bufts) for _ in range(4)]

    def run(args: list[str]) -> tuple[list[str], list[str]]:
        srv = llama_server(model_path, "--rpc", ",".join(endpoints), *args, "-c", "512", "-np", "1", "--no-repack",
                           "-lv", "5")
        try:
            return actual_devices(model, srv.output(), buft_to_dev)
        finally:
            srv.stop()  # an RPC server serves one client at a time

    for args in cases:
        predicted = Placement.from_settings(model, devices, parse_llama_args(["-m", model_path, *args]).settings)
        layers, tensors = run(args)
        assert layers == predicted.layer_device, args
        assert tensors == predicted.tensor_device, args
        # what `layerdeck canonical` does (app/cli/canonical.py), on the devices llama.cpp listed (their buffer
        # types name the RPC endpoints, which a --devices spec cannot)
        parsed = parse_llama_args(["-m", model_path, *args])
        p = Placement.from_settings(model, devices, parsed.settings)
        p.settings = parsed.settings.copy(n_gpu_layers=-1, tensor_split=None, devices=None, overrides=[])
        canon = build_command(p, model_path, rpc=endpoints).argv
        i = canon.index("-m")
        rest = canon[i + 2:]
        j = rest.index("--rpc")
        assert run(rest[:j] + rest[j + 2:]) == (layers, tensors), (args, canon)


def _seeded_command(rng: random.Random, devices: tuple[str, ...], bufts: tuple[str, ...]) -> list[str]:
    args = ["-ngl", rng.choice(["all", "3", "4", "99"]), "-ts", ",".join(str(rng.randint(1, 3)) for _ in devices)]
    for _ in range(rng.randint(1, 2)):
        ot = rng.choice(OT_CHOICES)
        for i, b in enumerate(bufts):
            ot = ot.replace(f"CUDA{i}", b)
        args += ["-ot", ot]
    if rng.random() < 0.5:
        args += ["-ncmoe", str(rng.randint(0, 3))]
    return args + ["--fit", "off"]


# --------------------------------------------------------------------------- hostile paths through every format

_CHARS = list(" \t'\"$%!^&|<>()[]{};,=*?~#@\\/:.-_aZ09") + ["ü", "模", "🦙", "\u00a0", "\u2018", "é"]
hostile_path = st.one_of(
    st.lists(st.sampled_from(_CHARS), min_size=1, max_size=16).map(lambda cs: "/m/" + "".join(cs) + ".gguf"),
    st.binary(min_size=1, max_size=12).filter(lambda b: b"\0" not in b and b"\n" not in b)
    .map(lambda b: os.fsdecode(b"/m/" + b + b".gguf")),
)


def _argv(path: str) -> list[str]:
    return ["/opt/llama/llama-server", "-m", path, "-a", path, "-ot", r"blk\.1\.ffn=CPU", "-c", "4096"]


_BASH = shutil.which("bash")
_ZSH = shutil.which("zsh")


def _shell_argv(shell: list[str], text: str) -> list[bytes]:
    """What the program gets when ``shell`` runs ``text`` (the program replaced by printf of its arguments)."""
    proc = subprocess.run([*shell, 'p() { printf "%s\\0" "$@"; }; ' + text], capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split(b"\0")[:-1]


@given(path=hostile_path)
@example(path=os.fsdecode(b"/m/m\xff odel.gguf"))
@example(path="/m/it's $HOME 100% !x! ^&.gguf")
@example(path="/m/\x01.gguf")  # found by this test: llama-swap cannot carry it (a typed refusal)
@example(path="/m/\r.gguf")  # found by this test: cmd.exe cannot carry it (a typed refusal)
def test_a_hostile_path_reaches_the_program_unchanged_in_every_format(path):
    argv = _argv(path)
    not_utf8 = any("\ud800" <= c <= "\udfff" for c in path)
    want_bytes = [os.fsencode(a) for a in argv[1:]]
    for multiline in (False, True):
        text = quote_posix(["p", *argv[1:]], multiline=multiline)
        assert parse_posix_command(text)[1] == ["p", *argv[1:]]
        if _BASH:
            assert _shell_argv([_BASH, "--norc", "--noprofile", "-c"], text) == want_bytes
        if _ZSH:
            assert _shell_argv([_ZSH, "-f", "-c"], text) == want_bytes
        for quote, parse, cannot in ((quote_powershell, parse_powershell_command, ""),
                                     (quote_cmd, parse_cmd_command, "\r\n\x1a")):
            try:
                text = quote(argv, multiline=multiline)
            except QuoteError:  # refused, and only for what that shell cannot carry (bytes that are not UTF-8)
                assert not_utf8 or any(c in cannot for c in path)
                continue
            assert parse(text) == ({}, argv)
    try:
        batch = render(argv, "cmd-batch")
        assert parse_cmd_command(batch, batch_file=True, delayed_expansion=True) == ({}, argv)
    except QuoteError:
        assert not_utf8 or any(c in "\r\n\x1a" for c in path)
    try:
        doc = yaml.safe_load(render(argv, "yaml", name="m"))
    except QuoteError:
        # llama-swap's YAML and splitter cannot carry control characters, YAML line breaks, bytes that are not
        # UTF-8, or ${...} (its macros)
        assert "${" in path or any(
            ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or "\ud800" <= c <= "\udfff" or c in "\u2028\u2029\ufeff" for c in path
        )
    else:
        cmd = swap_sanitize(doc["models"]["m"]["cmd"].replace("${PORT}", "5800"))
        assert golib_posix_split(cmd) == [*argv, "--port", "5800"]
    try:
        lines = ollama_parse(render(argv, "ollama"))
    except QuoteError:
        assert not all(c.isprintable() for c in path)
    else:
        assert lines[0] == ("model", path)
