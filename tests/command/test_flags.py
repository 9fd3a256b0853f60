"""The flag table: one row per option, every spelling parses, env variables round-trip, and it matches llama.cpp."""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import pytest

from app.command.flags import FLAGS, TOOLS, get, lookup, spellings
from app.command.formats import to_env
from app.command.parse import ArgsError, env_to_args, parse_llama_args
from app.memory.settings import LlamaSettings

#: A valid value for every flag Layerdeck reads (passthrough flags take any text).
SAMPLES = {
    "-m": "x.gguf", "--rpc": "h:1,h:2", "-dev": "CUDA0,CUDA1", "-ngl": "all", "-ts": "3,1", "-sm": "row", "-mg": "1",
    "-ot": r"blk\.1\.=CPU", "-ncmoe": "2", "-ncffn": "3", "--fit": "off", "-c": "4096", "-np": "2",
    "-ctk": "q8_0", "-ctv": "q4_0", "-fa": "on", "-b": "1024", "-ub": "256", "-t": "6", "-lm": "mlock",
    "--spec-draft-model": "d.gguf", "--spec-draft-ngl": "12", "--spec-draft-device": "RPC1",
    "--spec-draft-override-tensor": r"exps=CPU", "--spec-draft-n-cpu-moe": "3", "--spec-draft-type-k": "q8_0",
    "--spec-draft-type-v": "q8_0", "--spec-type": "draft-simple,ngram-mod", "--spec-draft-n-max": "5",
    "-mm": "mmproj.gguf", "-mmdev": "RPC0", "--image-min-tokens": "64", "--image-max-tokens": "1024",
}
SENTINEL = ["-c", "1234"]  # parsed after each flag: it must not be swallowed as a value


def _values(flag) -> list[str]:
    if flag.nargs == 0:
        return []
    if flag.name in SAMPLES:
        return [SAMPLES[flag.name]]
    if flag.bare is not None:
        return ["on"]
    return ["x"] * flag.nargs


def _tool(flag) -> str:
    return next((t for t in TOOLS if t in flag.tools and t != "bench"), "server")


def _summary(p):
    s = p.settings
    return (s, p.model, p.rpc, p.fit, p.load_mode, sorted(lookup(x)[0].name for x in p.ignored),
            sorted(lookup(x)[0].name for x in p.removed))


def _read(p, flag):
    return getattr(p if flag.setting in ("model", "rpc", "fit", "load_mode") else p.settings, flag.setting)


def _expected(flag, spelling):
    if flag.nargs:
        value = flag.convert(_values(flag)[0], spelling)
    else:
        value = flag.on if lookup(spelling)[1] else flag.off
    return list(value) if flag.setting in ("overrides", "rpc", "draft_overrides", "spec_types") else value


def test_no_spelling_is_in_two_rows():
    counts = Counter(s for f in FLAGS for s in f.spellings)
    assert [s for s, n in counts.items() if n > 1] == []
    assert len({f.name for f in FLAGS}) == len(FLAGS)
    assert len(FLAGS) > 300  # all of llama.cpp's options, not only the ones Layerdeck reads


def test_rows_are_consistent():
    for f in FLAGS:
        assert all(re.fullmatch(r"--?[A-Za-z][A-Za-z0-9.+-]*", s) for s in f.spellings), f.name
        assert f.tools <= set(TOOLS), f.name
        assert f.nargs in (0, 1, 2) and (f.metavar is None) == (f.nargs == 0), f.name
        if f.negative or f.bench_value:
            assert f.nargs == 0, f.name
        if f.bare is not None:
            assert f.nargs == 1 and f.choices and f.bare in f.choices, f.name
        if f.setting is not None and f.nargs:
            assert f.convert is not None, f.name
        if f.env:
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*", f.env), f.name
    envs = Counter(f.env for f in FLAGS if f.env)
    assert [e for e, n in envs.items() if n > 1] == []
    # LLAMA_ARG_NO_<X> means "off" for a yes/no option <X>: no other option may use that name
    no_vars = {f.env.replace("LLAMA_ARG_", "LLAMA_ARG_NO_", 1) for f in FLAGS if f.env_kind == "bool"}
    assert no_vars.isdisjoint(envs)


def test_every_modelled_flag_has_a_sample():
    assert {f.name for f in FLAGS if f.setting and f.nargs} <= set(SAMPLES)


@pytest.mark.parametrize("flag", FLAGS, ids=lambda f: f.name)
def test_every_spelling_parses_and_keeps_the_next_flag(flag):
    for spelling in flag.spellings:
        sentinel = ["-ngl", "7"] if flag.name == "-c" else SENTINEL
        p = parse_llama_args(["llama-server", spelling, *_values(flag), *sentinel], tool=_tool(flag))
        assert p.unknown == [], spelling
        if flag.name == "-c":
            assert p.settings.n_gpu_layers == 7, spelling
        else:
            assert p.settings.n_ctx == 1234, spelling
        if flag.removed:
            assert p.removed == [spelling] and any("removed" in w for w in p.warnings)
        elif flag.passthrough:
            assert p.ignored == [spelling]
        else:
            assert p.ignored == [] and _read(p, flag) == _expected(flag, spelling), spelling
        # llama.cpp reads '_' as '-' in a long spelling
        if spelling.startswith("--") and "-" in spelling[2:]:
            q = parse_llama_args([spelling[:2] + spelling[2:].replace("-", "_"), *_values(flag), *sentinel],
                                 tool=_tool(flag))
            assert q.unknown == [] and _summary(q) == _summary(p), spelling


def _env_cases():
    for f in FLAGS:
        if f.env is None or f.removed or f.legacy:
            continue
        yield f, [f.name, *_values(f)]
        for neg in f.negative[:1]:
            yield f, [neg]


@pytest.mark.parametrize("flag,args", list(_env_cases()), ids=lambda x: x.name if hasattr(x, "name") else "")
def test_environment_variable_round_trip(flag, args):
    argv = ["llama-server", *args]
    env, rest = to_env(argv)
    assert rest == ["llama-server"] and list(env) == [flag.env]
    back = env_to_args(env)
    assert back == args or (flag.env_kind == "bool" and lookup(back[0])[1] == lookup(args[0])[1])
    tool = _tool(flag)
    assert _summary(parse_llama_args(rest, tool=tool, env=env)) == _summary(parse_llama_args(argv, tool=tool))


def test_environment_semantics_of_llama_cpp():
    # a switch's variable counts only when truthy; a yes/no option's holds the state
    assert env_to_args({"LLAMA_ARG_CPU_MOE": "yes"}) == []
    assert env_to_args({"LLAMA_ARG_CPU_MOE": "true"}) == ["-cmoe"]
    assert env_to_args({"LLAMA_ARG_KV_UNIFIED": "0", "LLAMA_ARG_KV_OFFLOAD": "off"}) == ["-no-kvu", "-nkvo"]
    # compatibility name LLAMA_ARG_NO_<X>: any value means off
    assert env_to_args({"LLAMA_ARG_NO_REPACK": "1"}) == ["-nr"]
    assert parse_llama_args([], env={"LLAMA_ARG_NO_KV_OFFLOAD": "whatever"}).settings.no_kv_offload
    with pytest.raises(ArgsError, match="LLAMA_ARG_KV_UNIFIED='maybe': invalid boolean"):
        env_to_args({"LLAMA_ARG_KV_UNIFIED": "maybe"})
    # option order decides the override order, as llama.cpp applies variables in option order
    env = {"LLAMA_ARG_N_CPU_FFN": "1", "LLAMA_ARG_CPU_MOE": "1", "LLAMA_ARG_OVERRIDE_TENSOR": "a=CPU"}
    assert env_to_args(env) == ["-ot", "a=CPU", "-cmoe", "-ncffn", "1"]


def test_spellings_expand_aliases_but_not_negatives():
    assert spellings("-ngl") == ("-ngl", "--gpu-layers", "--n-gpu-layers")
    assert spellings("--no-kv-offload") == ("-nkvo", "--no-kv-offload")
    assert spellings("--rpc", "-m") == ("--rpc", "-rpc", "-m", "--model")
    assert spellings("--not-a-flag") == ("--not-a-flag",)
    with pytest.raises(KeyError):
        get("--not-a-flag")


# --------------------------------------------------------------------------- against the real llama.cpp


def _help_rows(text: str) -> list[tuple[list[str], str, str | None]]:
    """(spellings, rest of the flag column, env variable) per option listed by a ``--help``."""
    rows: list[tuple[list[str], str, str | None]] = []
    for line in text.splitlines():
        stripped = line.lstrip()
        env = re.search(r"\(env: ([A-Z0-9_]+)\)", line)
        if env and rows and len(line) - len(stripped) > 8:
            rows[-1] = (rows[-1][0], rows[-1][1], env.group(1))
        if not stripped.startswith("-") or len(line) - len(stripped) > 8:
            continue
        head = re.split(r"(?<=[^,\s])\s{2,}", stripped, maxsplit=1)[0]
        names = re.findall(r"(?<![\w-])(--?[a-zA-Z](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?)", head)
        rest = re.sub(r"(?<![\w-])--?[a-zA-Z](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?,?", "", head).strip()
        if names:
            rows.append((names, rest, env.group(1) if env else None))
    return rows


@pytest.mark.llama
@pytest.mark.parametrize("tool,exe", [("server", "llama-server"), ("fit-params", "llama-fit-params"),
                                      ("bench", "llama-bench")])
def test_table_matches_the_help_of_the_pinned_build(llama_bin, tool, exe):
    from app.llamacpp.build import exe_name

    proc = subprocess.run([str(llama_bin / exe_name(exe)), "--help"], capture_output=True, text=True, timeout=60)
    rows = _help_rows(proc.stdout + "\n" + proc.stderr)
    assert len(rows) > 40
    listed: set[str] = set()
    for names, rest, env in rows:
        if "removed" in rest:
            continue
        listed |= set(names)
        hits = {lookup(n) for n in names}
        assert None not in hits, f"{exe} lists {names} but the flag table lacks {[n for n in names if not lookup(n)]}"
        flags = {h[0].name for h in hits}
        assert len(flags) == 1, names  # one help row = one table row
        flag = get(names[0])
        assert tool in flag.tools, f"{flag.name}: {exe} accepts it"
        assert (flag.takes(tool) > 0) == bool(rest), f"{flag.name}: {exe} shows {rest!r} after it"
        if tool != "bench":
            assert flag.env == env, f"{flag.name}: {exe} says env {env}"
    for flag in FLAGS:
        if tool in flag.tools and not flag.legacy:
            assert set(flag.spellings) & listed or flag.removed, f"{flag.name} is not in {exe} --help"


def test_table_has_every_option_of_the_pinned_sources():
    """The llama-cli options are only in the source (the tests build no llama-cli): every spelling is in the table."""
    from app.llamacpp.build import build_key, cache_root

    arg_cpp = cache_root() / build_key() / "src" / "common" / "arg.cpp"
    if not arg_cpp.is_file():
        pytest.skip(f"no llama.cpp source at {arg_cpp}")
    text = re.sub(r"//[^\n]*", "", arg_cpp.read_text(encoding="utf-8", errors="replace"))
    found = set()
    for m in re.finditer(r"common_arg\(\s*\{([^}]*)\}(\s*,\s*\{([^}]*)\})?", text):
        found |= set(re.findall(r'"(-[^"]+)"', m.group(1) + (m.group(3) or "")))
    assert len(found) > 300
    assert sorted(s for s in found if lookup(s) is None) == []
    # and the environment variables
    envs = set(re.findall(r'set_env\("([A-Z0-9_]+)"\)', text))
    assert envs <= {f.env for f in FLAGS}


def test_defaults_unchanged_by_passthrough_flags():
    p = parse_llama_args(["llama-server", "--host", "0.0.0.0", "--port", "8080", "--temp", "0.7", "--jinja",
                          "--chat-template", "chatml", "-a", "m", "--metrics"])
    assert p.settings == LlamaSettings() and not p.unknown and len(p.ignored) == 7
