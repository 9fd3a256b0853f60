"""Diagnoses from captured failure output (tests/data/launch/fail-*.log) and from llama.cpp's message formats.

The live counterparts (each failure provoked with the real binaries) are in
``test_server_failures.py``; messages that need hardware this machine lacks
(CUDA, Metal) are built from the format strings in the llama.cpp source.
"""

from __future__ import annotations

import signal

import pytest

from app.launch.diagnose import RENAMES, Diagnosis, DiagnosisKind, diagnose, describe_exit
from tests.launch.helpers import DATA


def captured(name: str) -> tuple[str, int]:
    text = (DATA / name).read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    return rest, int(first.removeprefix("# exit status "))


def test_removed_flag_suggests_the_new_spelling():
    d = diagnose(*captured("fail-no-mmap.log"))
    assert d.kind == DiagnosisKind.INVALID_ARGUMENT
    assert d.facts["flag"] == "--no-mmap" and d.facts["replacement"] == "--load-mode none"
    assert "--load-mode none" in d.suggestion
    assert d.lines == ("error: invalid argument: --no-mmap",)


def test_bare_fa_suggests_a_value():
    d = diagnose(*captured("fail-bare-fa.log"))
    assert d.kind == DiagnosisKind.INVALID_ARGUMENT
    assert d.facts["replacement"] == "-fa on"
    assert "'--port'" in d.explanation


def test_rename_table_covers_the_removed_load_flags():
    assert RENAMES["--mlock"][0] == "--load-mode mlock"
    assert RENAMES["--no-mmap"][0] == "--load-mode none"
    assert RENAMES["-fa"][0] == "-fa on"


def test_unknown_buffer_type_lists_the_available_ones():
    text, rc = captured("fail-ot-cuda9.log")
    d = diagnose(text, rc, argv=["llama-server", "-ot", "exps=CUDA9"])
    assert d.kind == DiagnosisKind.UNKNOWN_BUFFER_TYPE
    assert d.facts["available"] == ("CPU",)
    assert d.facts["requested"] == ("CUDA9",)
    assert "CUDA9" in d.title and "CPU" in d.explanation
    assert any("Available buffer types" in ln for ln in d.lines)


def test_dead_rpc_endpoint_from_llama_cpp_abort():
    text, rc = captured("fail-rpc-dead.log")
    assert rc == -signal.SIGABRT
    d = diagnose(text, rc)
    assert d.kind == DiagnosisKind.RPC_UNREACHABLE   # not "crash": the abort message says why
    assert d.facts["endpoint"].startswith("127.0.0.1:")
    assert d.facts["endpoint"] in d.title


def test_port_in_use():
    d = diagnose(*captured("fail-port-in-use.log"))
    assert d.kind == DiagnosisKind.PORT_IN_USE
    assert d.facts["host"] == "127.0.0.1" and d.facts["port"] > 0
    assert str(d.facts["port"]) in d.title


def test_truncated_model_names_the_file():
    d = diagnose(*captured("fail-truncated.log"))
    assert d.kind == DiagnosisKind.MODEL_CORRUPT
    assert d.facts["path"].endswith("half.gguf") and d.facts["truncated"]
    assert "half.gguf" in d.title
    assert any("not within the file bounds" in ln for ln in d.lines)


def test_missing_model():
    d = diagnose(*captured("fail-missing.log"))
    assert d.kind == DiagnosisKind.MODEL_MISSING
    assert d.facts["path"].endswith("missing.gguf") and d.facts["reason"] == "No such file or directory"


def test_unknown_architecture():
    d = diagnose(*captured("fail-unknown-arch.log"))
    assert d.kind == DiagnosisKind.UNSUPPORTED_ARCH
    assert d.facts["architecture"] == "layerdeck-nonexistent"


def test_rpc_out_of_memory_names_the_server_and_the_size():
    text, rc = captured("fail-rpc-oom.log")
    d = diagnose(text, rc)
    assert d.kind == DiagnosisKind.OUT_OF_MEMORY
    assert d.facts["buffer_type"].startswith("RPC0[127.0.0.1:")
    assert d.facts["mib"] == pytest.approx(18375686144 / 2**20)
    assert d.facts["phase"] == "the model weights"
    assert "RPC server at 127.0.0.1:" in d.title
    assert any("unable to allocate" in ln for ln in d.lines)


# --- formats from the source, for hardware this machine does not have ---------------------------------------

def test_cuda_out_of_memory_line():
    # ggml/src/ggml-cuda/ggml-cuda.cu ggml_backend_cuda_buffer_type_alloc_buffer
    log = ("0.01.2 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 20480.00 MiB on device 1: "
           "cudaMalloc failed: out of memory\n"
           "0.01.2 E alloc_tensor_range: failed to allocate CUDA1 buffer of size 21474836480\n"
           "0.01.2 E llama_model_load: error loading model: unable to allocate CUDA1 buffer\n")
    d = diagnose(log, 1)
    assert d.kind == DiagnosisKind.OUT_OF_MEMORY
    assert d.facts["device"] == "CUDA1" and d.facts["mib"] == 20480.0
    assert d.facts["phase"] == "the model weights"
    assert "CUDA1" in d.title and "20,480 MiB" in d.explanation


def test_kv_cache_and_compute_out_of_memory():
    kv = ("E alloc_tensor_range: failed to allocate Vulkan0 buffer of size 4294967296\n"
          "E llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache\n")
    d = diagnose(kv, 1)
    assert d.kind == DiagnosisKind.OUT_OF_MEMORY and d.facts["phase"] == "the KV cache"
    assert "-c" in d.suggestion and "Vulkan0" in d.title
    compute = ("E ggml_gallocr_reserve_n_impl: failed to allocate CUDA0 buffer of size 2147483648\n"
               "E graph_reserve: failed to allocate compute buffers\n")
    d = diagnose(compute, 1)
    assert d.facts["phase"] == "the compute buffers" and "-ub" in d.suggestion
    metal = "E ggml_metal_buffer_type_alloc_buffer: failed to allocate Metal buffer of 8589934592 bytes (out of memory)"
    assert diagnose(metal, 1).facts["mib"] == 8192.0


# --- exit status ------------------------------------------------------------------------------------------------

def test_killed_from_outside_unless_we_sent_it():
    log = "0.00.1 I srv  update_slots: all slots are idle"
    d = diagnose(log, -signal.SIGKILL)
    assert d.kind == DiagnosisKind.KILLED and "out-of-memory killer" in d.explanation
    assert diagnose(log, -signal.SIGTERM).kind == DiagnosisKind.KILLED
    assert diagnose(log, -signal.SIGKILL, signals_sent=[signal.SIGTERM, signal.SIGKILL]).kind == DiagnosisKind.UNKNOWN
    assert diagnose(log, -signal.SIGABRT, stop_requested=True) is None     # judged by what we sent
    assert diagnose(log, 0, stop_requested=True) is None


def test_crash_by_signal_quotes_the_assert():
    log = ("0.00.1 I slot update_slots: id  0 | task 0 | new prompt\n"
           "/src/ggml/src/ggml-backend.cpp:1234: GGML_ASSERT(*cur_backend_id != -1) failed\n")
    d = diagnose(log, -signal.SIGABRT)
    assert d.kind == DiagnosisKind.CRASH
    assert "GGML_ASSERT" in d.explanation and "SIGABRT" in d.explanation
    assert diagnose("", -signal.SIGSEGV).kind == DiagnosisKind.CRASH
    assert diagnose("", 0xC0000005).kind == DiagnosisKind.CRASH  # Windows access violation
    assert "access violation" in describe_exit(0xC0000005)


def test_plain_exits():
    assert diagnose("", 0).kind == DiagnosisKind.EXITED
    d = diagnose("0.00.1 E something failed badly", 3)
    assert d.kind == DiagnosisKind.UNKNOWN and "something failed badly" in d.explanation


def test_kind_is_an_enum_that_reads_as_its_string():
    d = Diagnosis("timeout", "t", "e", "s")  # a plain string is taken as its DiagnosisKind
    assert d.kind is DiagnosisKind.TIMEOUT and d.kind == "timeout" and f"{d.kind}" == "timeout"
    with pytest.raises(ValueError):
        Diagnosis("no_such_kind", "t", "e", "s")
