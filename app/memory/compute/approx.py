"""The approximate compute path: a rough per-layer formula, used only when a graph cannot be built."""

from __future__ import annotations

APPROXIMATE = "compute buffers are approximate"


def approximate_note(arch: str, exc: BaseException) -> str:
    """The note for an estimate whose compute buffers come from :func:`approx_peaks`."""
    return (
        f"{APPROXIMATE}: Layerdeck could not build llama.cpp's compute graph for '{arch}' "
        f"({type(exc).__name__}: {exc}), so compute uses a rough per-layer formula; weights and KV are exact. "
        "Use Verify (llama-fit-params) for the real compute sizes"
    )


def approx_peaks(p, shape, layer_be, cpu, pipeline):
    """Fallback when the graph cannot be built: the dominant terms of a llama-style layer, per backend.

    A layer needs its widest intermediate (the f32 KQ scores without flash attention, else the gated FFN or
    the selected experts' activations) plus a few hidden-state-sized tensors; the output device also needs
    the logits; inputs (mask, positions) live on the CPU and are copied to each device (x4 with pipeline
    parallelism).
    """
    nt = min(shape.n_ctx, shape.n_ubatch)
    n_out = max(1, min(nt, shape.n_outputs_max))
    x = p.n_embd * nt * 4
    mask = shape.n_ctx_seq * nt * (2 if shape.flash_attn else 4)
    copies = 4 if pipeline else 1
    peaks = [0] * (cpu + 1)
    used = set()
    for il in range(p.n_layer - p.nextn_layers):
        be = layer_be[il]
        used.add(be)
        if p.recurrent_layers[il]:
            widest = (2 * p.ssm_d_inner + 2 * p.ssm_n_group * p.ssm_d_state + p.ssm_dt_rank) * nt * 4 * 2
        else:
            n_kv = shape.size_swa if p.has_swa and p.swa_layers[il] and shape.size_swa else shape.n_ctx_seq
            hd = p.head_dim_v or (p.n_embd // max(1, p.n_head[il]))
            attn = p.n_head[il] * nt * 4 * (hd if shape.flash_attn else n_kv)
            ffn = 3 * nt * 4 * max(p.n_ff[il], p.n_expert_used * (p.n_ff_exp or p.n_ff[il]))
            widest = max(attn, ffn)
        peaks[be] = max(peaks[be], widest + 3 * x)
    for be in used:
        if be != cpu:
            peaks[be] += copies * (mask + x)
    out_be = layer_be[-1]
    peaks[out_be] = max(peaks[out_be], p.n_vocab * n_out * 4 + 2 * x)
    peaks[cpu] += copies * (mask + 2 * x)
    return peaks
