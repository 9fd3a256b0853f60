"""Time Layerdeck's GGUF reader against gguf.GGUFReader on a Qwen3-235B-A22B-shaped header.

Writes (once, in a temp folder) a sparse file with a 151,936-token vocabulary,
151,387 merges and 1,131 tensors (94 layers x 12 + 3), data region left as a
hole, then prints both readers' times and the ratio.

    python benchmarks/bench_gguf_read.py [--runs 5] [--skip-reference]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import GGUFWriter

from app.model import open_model  # noqa: E402

N_VOCAB, N_MERGES, N_LAYER, N_EMBD, N_EXPERT, N_FF_EXP = 151_936, 151_387, 94, 4096, 128, 1536


def write_file(path: Path) -> None:
    w = GGUFWriter(str(path), "qwen3moe")
    w.add_block_count(N_LAYER)
    w.add_context_length(40960)
    w.add_embedding_length(N_EMBD)
    w.add_head_count(64)
    w.add_head_count_kv(4)
    w.add_key_length(128)
    w.add_value_length(128)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(8)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}" + "x" * (i % 7) for i in range(N_VOCAB)])
    w.add_token_types([1] * N_VOCAB)
    w.add_token_merges([f"a{i} b{i}" for i in range(N_MERGES)])
    data = 0

    def ti(name: str, shape: list[int], q: Q) -> None:
        nonlocal data
        block, size = gguf.GGML_QUANT_SIZES[q]
        nbytes = int(np.prod(shape)) // block * size
        byte_shape = list(reversed(shape))
        byte_shape[-1] = byte_shape[-1] // block * size
        w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=q)
        data += (nbytes + 31) // 32 * 32

    ti("token_embd.weight", [N_EMBD, N_VOCAB], Q.Q4_K)
    for i in range(N_LAYER):
        for name, shape, q in [
            ("attn_norm", [N_EMBD], Q.F32), ("attn_q", [N_EMBD, 8192], Q.Q4_K), ("attn_k", [N_EMBD, 512], Q.Q4_K),
            ("attn_v", [N_EMBD, 512], Q.Q6_K), ("attn_output", [8192, N_EMBD], Q.Q4_K), ("attn_q_norm", [128], Q.F32),
            ("attn_k_norm", [128], Q.F32), ("ffn_norm", [N_EMBD], Q.F32), ("ffn_gate_inp", [N_EMBD, N_EXPERT], Q.F32),
            ("ffn_gate_exps", [N_EMBD, N_FF_EXP, N_EXPERT], Q.Q4_K), ("ffn_up_exps", [N_EMBD, N_FF_EXP, N_EXPERT], Q.Q4_K),
            ("ffn_down_exps", [N_FF_EXP, N_EMBD, N_EXPERT], Q.Q6_K),
        ]:
            ti(f"blk.{i}.{name}.weight", shape, q)
    ti("output_norm.weight", [N_EMBD], Q.F32)
    ti("output.weight", [N_EMBD, N_VOCAB], Q.Q6_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fh = w.fout[0]
    fh.flush()
    end = (fh.tell() + 31) // 32 * 32
    fh.close()
    os.truncate(path, end + data)  # the data region is a hole


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skip-reference", action="store_true", help="do not time gguf.GGUFReader (it is slow)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "qwen3-235b-a22b-shaped.gguf"
        t0 = time.perf_counter()
        write_file(path)
        print(f"wrote {path.name}: {path.stat().st_size / 2**30:.1f} GiB apparent, "
              f"{path.stat().st_blocks * 512 / 2**20:.1f} MiB on disk, in {time.perf_counter() - t0:.1f} s")
        model = open_model(path)
        print(f"tensors {len(model.tensors)}, vocabulary {model.params.n_vocab}, blocks {len(model.blocks)}")
        ours = timed(lambda: open_model(path), args.runs)
        print(f"layerdeck open_model (header + params + blocks): {ours * 1000:8.1f} ms (median of {args.runs})")
        if not args.skip_reference:
            ref = timed(lambda: gguf.GGUFReader(path), 1)
            print(f"gguf.GGUFReader:                                 {ref * 1000:8.1f} ms (1 run)")
            print(f"speed-up: {ref / ours:.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
