"""``--rpc`` when llama.cpp cannot list the hosts' devices: one assumed device per host where the answer stays
exact, a one-line stop where it would depend on memory nobody knows, never a CPU-only answer.

The placement subcommands run in-process (``app.cli.main``) with no llama.cpp on the machine
(``LAYERDECK_LLAMA_CPP_DIR`` an empty folder, ``PATH`` without llama-server); the ``llama`` tests run the same
commands with the real llama-server and real ``ggml-rpc-server`` processes and compare.
"""

from __future__ import annotations

import json
import socket

import pytest

from app import cli
from app.devices.rpc import ASSUMED
from tests.gguf_factory import write_tiny_model


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny llama (4 layers + output: 5 offloadable layers)."""
    return str(write_tiny_model("llama", tmp_path_factory.mktemp("rpc-unknown") / "llama.gguf"))


@pytest.fixture
def no_llama(monkeypatch, tmp_path):
    empty = tmp_path / "no-llama"
    empty.mkdir()
    monkeypatch.setenv("LAYERDECK_LLAMA_CPP_DIR", str(empty))
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("LLAMA_ARG_RPC", raising=False)
    return empty


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def notes_of(err: str, prefix: str = "# ") -> list[str]:
    return [ln[len(prefix) :] for ln in err.splitlines() if ln.startswith(prefix)]


def test_canonical_keeps_one_rpc_device_per_endpoint(no_llama, tiny, capsys):
    e1, e2 = f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"
    code, out, err = run(capsys, "canonical", "--", "-m", tiny, "--rpc", f"{e1},{e2}", "-ngl", "99", "-ts", "1,1")
    assert code == 0, err
    # before: "... --rpc E1,E2 -ngl 0 --fit off" (everything on the CPU); the 5 layers split 1:1 are 3 + 2
    assert out == f"llama-server -m {tiny} --rpc {e1},{e2} -dev RPC0,RPC1 -ngl 5 -ts 3,2 --fit off\n"
    notes = notes_of(err)
    assert notes[0].startswith("--fit is on")
    rpc_note = next(n for n in notes if n.startswith("--rpc: "))
    assert f"RPC0 = {e1} (refused); RPC1 = {e2} (refused)" in rpc_note
    assert any(n.startswith("llama.cpp: llama-server was not found") for n in notes)


def test_estimate_and_import_put_layers_on_the_assumed_devices(no_llama, tiny, capsys):
    e1, e2 = f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"
    args = ["--", "-m", tiny, "--rpc", f"{e1},{e2}", "-ngl", "99", "-ts", "1,1", "--fit", "off"]
    code, out, err = run(capsys, "estimate", "--json", *args)
    assert code == 0, err
    doc = json.loads(out)
    assert [d["name"] for d in doc["devices"]] == ["RPC0", "RPC1", "Host"]
    assert [d["capacity"] for d in doc["devices"]] == [None, None, None]  # unknown, not 0
    assert doc["layers"] == ["RPC0", "RPC0", "RPC0", "RPC1", "RPC1"]
    assert doc["devices"][0]["context"] > 0 and doc["devices"][2]["context"] == 0  # the KV cache went with them
    assert (
        f"memory of RPC0 ({e1}), RPC1 ({e2}) is unknown: llama.cpp did not list that RPC host, so one device "
        "of unknown memory is assumed per host; per-device use is exact, capacity and free space cannot be "
        "checked" in doc["notes"]
    )
    assert any(n.startswith("--rpc: devices of these RPC hosts are unknown") for n in doc["notes"])

    code, out, err = run(capsys, "estimate", *args)
    assert code == 0, err
    assert [ln.split()[0] for ln in out.splitlines()[:3]] == ["RPC0", "RPC1", "Host"]
    assert any(ln.startswith(f"note: memory of RPC0 ({e1})") for ln in out.splitlines())

    code, out, err = run(capsys, "import", "--json", *args)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["devices"] == ["RPC0", "RPC1", "CPU"]
    assert doc["layers"] == ["RPC0", "RPC0", "RPC0", "RPC1", "RPC1"]
    assert any(n.startswith("--rpc: devices of these RPC hosts are unknown") for n in doc["notes"])
    code, out, err = run(capsys, "import", *args)
    assert code == 0, err
    assert out.splitlines()[:2] == ["layers 0-2: RPC0", "layers 3-output: RPC1"]
    assert any(ln.startswith("note: --rpc: ") for ln in out.splitlines())


def test_one_endpoint_all_layers_is_exact(no_llama, tiny, capsys):
    e1 = f"127.0.0.1:{closed_port()}"
    code, out, err = run(capsys, "import", "--json", "--", "-m", tiny, "--rpc", e1, "-ngl", "all", "--fit", "off")
    assert code == 0, err
    assert json.loads(out)["layers"] == ["RPC0"] * 5


@pytest.mark.parametrize(
    "extra",
    [
        ["-ngl", "99"],  # two devices, no -ts: llama.cpp splits by free memory
        [],  # --fit on (the default) and nothing pinned: llama.cpp fits to the free memory
        ["-ngl", "99", "-ts", "0,0"],  # all-zero -ts is no split either
    ],
    ids=["no-ts", "fit", "zero-ts"],
)
def test_a_placement_that_depends_on_unknown_memory_stops(no_llama, tiny, capsys, extra):
    e1, e2 = f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"
    for sub in ("estimate", "import", "canonical"):
        code, out, err = run(capsys, sub, "--", "-m", tiny, "--rpc", f"{e1},{e2}", *extra)
        assert (code, out) == (2, ""), (sub, out, err)
        assert err == (
            f"layerdeck: the placement depends on the memory of RPC devices llama.cpp did not list "
            f"(RPC0 = {e1}: refused, RPC1 = {e2}: refused). To fix it, split the layers yourself with "
            "-ngl N -ts A,B,..., or start ggml-rpc-server on those hosts and make llama-server available "
            "(--llama-dir or LAYERDECK_LLAMA_CPP_DIR).\n"
        )


def test_fit_needs_the_memory_and_stops(no_llama, tiny, capsys):
    e1 = f"127.0.0.1:{closed_port()}"
    code, out, err = run(capsys, "fit", tiny, "--rpc", e1)
    assert (code, out) == (2, "")
    assert err.startswith(f"layerdeck: the placement depends on the memory of RPC devices llama.cpp did not list (RPC0 = {e1}: refused)")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("rpc", "message"),
    [
        ("127.0.0.1:1,http://127.0.0.1:2", "layerdeck: --rpc: 'http://127.0.0.1:2': give host:port without a scheme"),
        ("127.0.0.1:0", "layerdeck: --rpc: '127.0.0.1:0': the port must be a number from 1 to 65535"),
        ("[::1]:50052", "layerdeck: --rpc: '[::1]:50052': llama.cpp RPC connects over IPv4 only"),
        ("127.0.0.1:\u0661\u0662", "layerdeck: --rpc: '127.0.0.1:\u0661\u0662': the port must be a number"),
        ("", "layerdeck: --rpc '' has an empty entry (nothing, or an extra comma): llama.cpp aborts on it."),
        ("127.0.0.1:1,,127.0.0.1:2", "layerdeck: --rpc '127.0.0.1:1,,127.0.0.1:2' has an empty entry"),
    ],
    ids=["scheme", "port-0", "ipv6", "arabic-digits", "empty", "double-comma"],
)
def test_an_invalid_endpoint_stops_instead_of_answering_cpu_only(no_llama, tiny, capsys, rpc, message):
    for sub in ("estimate", "import", "canonical"):
        code, out, err = run(capsys, sub, "--", "-m", tiny, "--rpc", rpc, "-ngl", "99", "-ts", "1,1")
        assert (code, out) == (2, ""), (sub, out, err)
        assert err.startswith(message) and err.count("\n") == 1, err


def test_one_server_under_two_names_stops_but_a_repeat_is_one_host(no_llama, tiny, capsys):
    with socket.socket() as listener:  # a listening socket: both spellings reach the same server
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        code, out, err = run(capsys, "import", "--json", "--", "-m", tiny, "--rpc", f"127.0.0.1:{port},localhost:{port}",
                             "-ngl", "99", "-ts", "1,1")
        assert (code, out) == (2, "")
        assert err.startswith(f"layerdeck: --rpc: same server as 127.0.0.1:{port}: llama.cpp would open a second")
        # the same text twice: llama.cpp registers the host once (ggml_backend_rpc_add_server's map)
        code, out, err = run(capsys, "import", "--json", "--", "-m", tiny, "--rpc", f"127.0.0.1:{port},127.0.0.1:{port}",
                             "-ngl", "99", "-ts", "1,1")
    assert code == 0, err
    assert json.loads(out)["devices"] == ["RPC0", "CPU"]


def test_devices_reports_an_empty_entry_as_invalid(no_llama, capsys):
    e1 = f"127.0.0.1:{closed_port()}"
    code, out, err = run(capsys, "devices", "--json", f"--rpc={e1},")
    assert code == 1, err
    doc = json.loads(out)
    assert [(h["endpoint"], h["status"]) for h in doc["rpc_hosts"]] == [(e1, "refused"), ("", "invalid")]
    rpc = [d for d in doc["devices"] if d["kind"] == "rpc"]
    assert [(d["name"], d["rpc_endpoint"], d["total_bytes"], d["name_guessed"], d["warnings"]) for d in rpc] == [
        ("RPC0", e1, None, True, [ASSUMED])
    ]
    code, out, err = run(capsys, "devices", "--json", "--rpc=")
    assert code == 1
    assert [(h["endpoint"], h["status"]) for h in json.loads(out)["rpc_hosts"]] == [("", "invalid")]


# --------------------------------------------------------------------------- the same with llama.cpp


@pytest.mark.llama
def test_with_llama_server_the_answers_are_the_same_and_memory_is_known(
    tiny, capsys, llama_bin, rpc_servers, monkeypatch, tmp_path
):
    servers = rpc_servers(2)
    rpc = ",".join(s.endpoint for s in servers)
    args = ["--", "-m", tiny, "--rpc", rpc, "-ngl", "99", "-ts", "1,1"]
    code, with_llama, err = run(capsys, "canonical", "--llama-dir", str(llama_bin), *args)
    assert code == 0, err
    assert with_llama == f"llama-server -m {tiny} --rpc {rpc} -dev RPC0,RPC1 -ngl 5 -ts 3,2 --fit off\n"
    assert not any(n.startswith("--rpc: ") for n in notes_of(err))
    code, out, err = run(capsys, "estimate", "--json", "--llama-dir", str(llama_bin), *args)
    assert code == 0, err
    listed = json.loads(out)
    assert [d["name"] for d in listed["devices"]] == ["RPC0", "RPC1", "Host"]
    assert all(d["capacity"] and d["capacity"] > 0 for d in listed["devices"][:2])

    empty = tmp_path / "none"
    empty.mkdir()
    monkeypatch.setenv("LAYERDECK_LLAMA_CPP_DIR", str(empty))
    monkeypatch.setenv("PATH", str(empty))
    code, without, err = run(capsys, "canonical", *args)
    assert code == 0, err
    assert without == with_llama
    code, out, err = run(capsys, "estimate", "--json", *args)
    assert code == 0, err
    assumed = json.loads(out)
    assert assumed["layers"] == listed["layers"] == ["RPC0", "RPC0", "RPC0", "RPC1", "RPC1"]
    for a, b in zip(assumed["devices"], listed["devices"]):
        assert (a["name"], a["model"], a["context"], a["compute"]) == (b["name"], b["model"], b["context"], b["compute"])


@pytest.mark.llama
def test_a_host_that_is_down_keeps_the_numbering_of_the_others(capsys, llama_bin, rpc_servers):
    (server,) = rpc_servers(1)
    down = f"127.0.0.1:{closed_port()}"
    code, out, err = run(capsys, "devices", "--json", "--llama-dir", str(llama_bin), "--rpc", f"{down},{server.endpoint}")
    assert code == 1, err
    doc = json.loads(out)
    rpc = [d for d in doc["devices"] if d["kind"] == "rpc"]
    # llama.cpp numbers RPC devices across all --rpc entries: the host that is down would be RPC0, so the one
    # that answered is RPC1 (numbered here, not by llama.cpp's own listing of all hosts: name_guessed)
    assert [(d["name"], d["rpc_endpoint"], d["name_guessed"]) for d in rpc] == [
        ("RPC0", down, True),
        ("RPC1", server.endpoint, True),
    ]
    assert rpc[0]["total_bytes"] is None and rpc[1]["total_bytes"] > 0
    assert [h["status"] for h in doc["rpc_hosts"]] == ["refused", "ok"]
