"""Expected speed of a placement: decode and prompt-processing tokens per second, MoE-aware.

Decode (one token at a time) is memory-bandwidth bound. Per token every
device reads the dense weights it holds once, only ``n_expert_used /
n_expert`` of the routed-expert bytes it holds, and its KV cache up to the
current depth; devices run one after the other (layer split), so the times
add up. Every time the computation crosses devices (GPU -> CPU for a
CPU-resident expert layer and back, GPU -> GPU at a layer-split boundary,
over the network for an RPC host) a hop cost is added: a fixed latency
plus the hidden state over the link.

Prompt processing (a batch of ``n_ubatch`` tokens) is compute bound on
GPUs: 2 FLOPs per active weight per token. Weights resident in host
memory are copied to the first GPU for every micro-batch when the batch
is at least llama.cpp's op-offload threshold (32 tokens,
``GGML_OP_OFFLOAD_MIN_BATCH`` in ``ggml/src/ggml-cuda/ggml-cuda.cu``),
so the PCIe bandwidth limits it; below it, or without a GPU, the CPU
computes them itself.

Efficiency factors (the fraction of the nominal bandwidth and compute a
device reaches) default to typical values and are fitted per machine from
``llama-bench`` results by :mod:`app.speed.calibrate`. See
``docs/speed-model.md`` for the assumptions and the reference figures
this model reproduces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..lanes import CPU
from ..memory.layout import WeightPlacement
from ..model import Model, Role
from ..model.hparams import PARALLEL_HYBRID_ARCHS

GB = 1e9
#: The key of attention (over the KV cache) in the per-type cost tables.
ATTENTION = "attention"

#: ggml types whose CPU kernels share a design, and so a cost per element (the tables' keys): the k-quants
#: (super-blocks of 256), Q8_0, the other legacy 32-blocks, the i-quants (grid lookups), MXFP4 (a 4-bit
#: float lookup), the float types. Few families keep a calibration identifiable: a Q4_K_M file always mixes
#: Q4_K and Q6_K in about the same proportion, so a cost per ggml type could not be told apart.
_FAMILY = {
    0: "float",
    1: "float",
    30: "float",
    8: "q8_0",
    2: "legacy",
    3: "legacy",
    6: "legacy",
    7: "legacy",
    9: "legacy",
    39: "mxfp4",
    34: "ternary",
    35: "ternary",
}
_FAMILY.update({t: "k" for t in range(10, 16)})
_FAMILY.update({t: "iq" for t in (16, 17, 18, 19, 20, 21, 22, 23, 29)})


def type_family(type_id: int) -> str:
    """The cost family of a ggml type (see :data:`_FAMILY`); "other" for the rest."""
    return _FAMILY.get(type_id, "other")


OP_OFFLOAD_MIN_BATCH = 32  # GGML_OP_OFFLOAD_MIN_BATCH (ggml/src/ggml-backend.cpp)


#: Per core and clock cycle, by the widest SIMD the CPU has: (weight elements a decode dot product consumes,
#: FLOPs a matrix-matrix kernel does). AVX2 with FMA: two 8-float FMA units (32 FLOP), about 8 quantized
#: elements per cycle in ggml's vec_dot kernels; AVX-512 twice that; NEON half. Calibration scales them.
SIMD_RATES: dict[str, tuple[float, float]] = {
    "avx512f": (16.0, 64.0),
    "avx2": (8.0, 32.0),
    "neon": (4.0, 16.0),
    "": (4.0, 16.0),
}


#: Cores that saturate a CPU's memory bandwidth in decode (one core streams a fraction of it; desktop dual-
#: channel memory is saturated by a few). Measured here: -t 1 decodes at 0.57-0.58 of -t 2's rate on 2 cores.
SATURATING_THREADS = 4

#: Relative cost per element of ggml's CPU kernels by type, decode and prompt, where calibration has not
#: measured it: MXFP4's 4-bit floats are decoded through a lookup table with an E8M0 scale per block
#: (about 2x the integer types' cost per element, measured here on AVX2: 2.1-2.5 decode, 2.1-2.3 prompt).
DEFAULT_TYPE_COST: dict[str, float] = {"mxfp4": 2.2}
#: Decode also pays for attention over the cache: per cached token and head, the flash-attention kernel's
#: f16 loads, online softmax (an exp per score) and bookkeeping cost about 16 weight elements' worth per
#: element of K and V (measured here: +32 ms per token at depth 1024 on Llama-3.2-1B, +36 ms on OLMoE).
DEFAULT_DECODE_COST: dict[str, float] = {**DEFAULT_TYPE_COST, ATTENTION: 16.0}


@dataclass
class DeviceSpeed:
    """What the speed model knows about one device (``CPU`` for the host).

    A GPU decodes at its memory bandwidth and processes prompts at its compute rate. A CPU (the host, and a
    ``ggml-rpc-server`` that runs the CPU backend) is limited by both in decode: per token it streams the
    weights from RAM *and* runs ggml's dot-product kernels over every weight element, on ``threads`` cores;
    the two add up (measured: ``benchmarks/bench_speed_truth.py``)."""

    name: str
    kind: str = "gpu"  # gpu | cpu | rpc
    bandwidth: float = 500 * GB  # bytes/s, memory
    flops: float = 0.0  # FLOP/s usable for matmuls; 0 = derive from bandwidth (GPU) or cores x clock (CPU)
    link_bandwidth: float = 25 * GB  # bytes/s to the host (PCIe) or over the network (RPC)
    link_latency: float = 60e-6  # s per crossing (sync + launch; network round trip for RPC)
    eff_bandwidth: float = 0.70  # fitted by calibration; 0.5 for host RAM (see docs/speed-model.md)
    eff_flops: float = 0.45
    flops_per_byte: float = 0.0  # compute per byte of bandwidth when flops is unknown; 0 = by kind
    # CPU-type devices (the host; an RPC server on the CPU backend): cores, clock and SIMD give the kernels'
    # rates; 0 cores = not a CPU-type device (a GPU, or an RPC server that reported a GPU's bandwidth)
    cores: int = 0  # physical cores llama.cpp's default thread count uses
    clock_hz: float = 0.0
    simd: str = ""
    threads: int = 0  # -t for the host (0 = llama.cpp's default: the physical cores)
    eff_vec: float = 0.90  # fraction of SIMD_RATES' decode elements per cycle reached; fitted by calibration
    # decode cost per element and prompt cost per FLOP by ggml type (ATTENTION: over the KV cache), relative
    type_cost: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_DECODE_COST))
    type_cost_pp: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TYPE_COST))

    @property
    def is_cpu(self) -> bool:
        return self.cores > 0

    def n_threads(self, threads: int | None = None) -> int:
        """Threads this device's kernels run on: ``threads`` (the host's -t) or its default, at most its cores
        (llama.cpp's threads beyond the physical cores share them: no gain, measured here)."""
        t = threads or self.threads or self.cores
        return max(1, min(t, self.cores)) if self.cores else 1

    @property
    def nominal_flops(self) -> float:
        if self.is_cpu and not self.flops:
            return self.cores * self.clock_hz * SIMD_RATES.get(self.simd, SIMD_RATES[""])[1]
        ratio = self.flops_per_byte or (8.0 if self.kind == "cpu" else 100.0)  # see docs/speed-model.md
        return self.flops or self.bandwidth * ratio

    @property
    def effective_flops(self) -> float:
        return self.nominal_flops * self.eff_flops

    def cpu_flops(self, threads: int | None = None) -> float:
        """Matrix-matrix FLOP/s on ``threads`` cores (a CPU-type device), before the per-type cost."""
        return self.nominal_flops * self.eff_flops * self.n_threads(threads) / self.cores

    def ram_rate(self, threads: int | None = None) -> float:
        """Bytes/s the decode kernels stream from RAM on ``threads`` cores: a single core cannot saturate the
        memory controller; about :data:`SATURATING_THREADS` cores do (a CPU-type device)."""
        sat = min(self.cores, SATURATING_THREADS) if self.cores else 1
        return self.bandwidth * self.eff_bandwidth * min(1.0, self.n_threads(threads) / max(sat, 1))

    def vec_rate(self, threads: int | None = None) -> float:
        """Weight elements per second the decode kernels consume on ``threads`` cores (a CPU-type device)."""
        per_cycle = SIMD_RATES.get(self.simd, SIMD_RATES[""])[0]
        return self.n_threads(threads) * self.clock_hz * per_cycle * self.eff_vec


@dataclass
class SpeedParams:
    devices: dict[str, DeviceSpeed]
    token_overhead: float = 1.5e-3  # s per token: graph launch, sampling, host work
    cpu: CpuFacts | None = None  # the host CPU the figures assume (None: not known)

    def get(self, name: str) -> DeviceSpeed:
        d = self.devices.get(name)
        if d is None:
            d = self.devices[name] = (
                DeviceSpeed(name, "cpu", 60 * GB, eff_bandwidth=0.5) if name == CPU else DeviceSpeed(name, "gpu")
            )
        return d


@dataclass(frozen=True)
class CpuFacts:
    """The host CPU, for the CPU-type devices' kernel rates."""

    physical_cores: int
    simd: tuple[str, ...] = ()  # instruction-set flags (avx2, avx512f, neon, ...)
    mhz: float | None = None  # sustained clock; None = unknown (2,000 MHz assumed, said in the notes)

    @property
    def best_simd(self) -> str:
        return next((s for s in SIMD_RATES if s and s in self.simd), "")


@dataclass
class Workload:
    """What llama-bench (or a server) runs: ``n_prompt`` tokens of prompt in micro-batches of ``n_ubatch``
    after ``depth`` tokens already in the cache, or ``n_gen`` tokens generated one by one at that depth;
    ``n_seq`` sequences decoding together (parallel slots: the aggregate rate is predicted)."""

    n_prompt: int = 0
    n_gen: int = 0
    depth: int = 0
    threads: int | None = None
    n_ubatch: int = 512
    n_batch: int = 2048
    n_seq: int = 1
    shared_prompt: bool = False


@dataclass
class DecodePrediction:
    tokens_per_s: float
    seconds_per_token: float
    device_seconds: dict[str, float]  # reading weights + KV, per device
    device_bytes: dict[str, float]  # bytes read per token, per device
    hops: int
    hop_seconds: float
    notes: list[str] = field(default_factory=list)


@dataclass
class PromptPrediction:
    tokens_per_s: float
    seconds_per_ubatch: float
    device_seconds: dict[str, float]
    transfer_seconds: float
    offloaded: bool


class SpeedFacts:
    """Per-tensor constants of one model for the speed model: bytes and elements read per decoded token, FLOPs
    per prompt token, and each tensor's ggml type.

    The output head runs for every decoded token but only for the last token of a prompt (llama.cpp computes
    logits where the batch asks for them: one per sequence), so it is left out of the prompt FLOPs; with tied
    embeddings (no ``output.weight``) the token embedding is that head, read whole per decoded token.

    Whoever predicts many placements of one model (a session, the fastest search, calibration) builds one
    and passes it to :func:`predict_decode` / :func:`predict_prompt`."""

    def __init__(self, model: Model):
        p = model.params
        frac = p.n_expert_used / p.n_expert if p.n_expert else 1.0
        self.model = model
        self.roles = [(b.layer, b.role, b.nextn) for b in model.index.tensor_block]
        tied = not any(t.name == "output.weight" for t in model.tensors)
        self.read_per_token: list[float] = []
        self.elems_per_token: list[float] = []
        self.flops_per_token: list[float] = []
        self.types: list[str] = [type_family(t.type_id) for t in model.tensors]
        self.expert: list[bool] = []
        # a Granite Switch LoRA stack is read one adapter slot per token (MUL_MAT_ID over adapters + 1 slots)
        slot = 1.0 / (p.n_adapters + 1) if p.router_layer >= 0 else 1.0
        for t, (_layer, role, nextn) in zip(model.tensors, self.roles):
            head = (
                role is Role.OUTPUT and t.name.startswith("output.weight") or (tied and t.name == "token_embd.weight")
            )
            self.expert.append(role is Role.EXPERTS and not nextn)
            lora = t.name.endswith((".lora_a", ".lora_b"))
            if nextn or t.name.startswith("enc."):  # T5's encoder: llama-server's decodes never run it
                read, elems = 0.0, 0.0
            elif lora:
                read, elems = t.nbytes * slot, t.n_elements * slot
            elif head:
                read, elems = float(t.nbytes), float(t.n_elements)
            elif role is Role.EXPERTS:
                read, elems = t.nbytes * frac, t.n_elements * frac
            elif role is Role.INPUT:
                read, elems = t.nbytes / max(p.n_vocab, 1), 0.0  # one row per token, no arithmetic
            else:
                read, elems = float(t.nbytes), float(t.n_elements) if len(t.shape) > 1 else 0.0
            self.read_per_token.append(read)
            self.elems_per_token.append(elems)
            if nextn or head or role is Role.INPUT or len(t.shape) < 2 or t.name.startswith("enc."):
                self.flops_per_token.append(0.0)
            else:  # each token uses n_used experts; a micro-batch touches (nearly) every expert's weights
                share = frac if role is Role.EXPERTS else slot if lora else 1.0
                self.flops_per_token.append(2.0 * t.n_elements * share)
        # attention per token and cached token, per layer: QK^T and softmax(QK^T)V (2 FLOPs a multiply-add)
        attn_too = p.arch in PARALLEL_HYBRID_ARCHS  # falcon-h1: attention in every (recurrent) layer
        n_attn = [
            (p.n_head[i] if i < len(p.n_head) else 0)
            * (p.head_dim_k + p.head_dim_v if not p.kv_lora_rank else p.kv_lora_rank * 2 + (p.n_rot or 0))
            for i in range(p.n_layer - p.nextn_layers)
            if attn_too or not (p.recurrent_layers and i < len(p.recurrent_layers) and p.recurrent_layers[i])
        ]
        self.attn_flops_per_cell = 2.0 * sum(n_attn)
        # the f16 K and V (or MLA's latent) of one cached token, all attention layers: read per decoded token
        self.kv_bytes_per_cell = 2.0 * sum(
            (p.n_head_kv[i] if i < len(p.n_head_kv) else 0) * (p.head_dim_k + p.head_dim_v)
            if not p.kv_lora_rank
            else p.kv_lora_rank + (p.n_rot or 0)
            for i in range(p.n_layer - p.nextn_layers)
            if attn_too or not (p.recurrent_layers and i < len(p.recurrent_layers) and p.recurrent_layers[i])
        )
        self.swa_window = p.n_swa
        self.swa_share = (
            sum(1 for i, s in enumerate(p.swa_layers[: p.n_layer]) if s) / max(len(n_attn), 1) if p.n_swa else 0.0
        )
        # the same as arrays, for the per-placement digest (the board predicts on every drag)
        self.families = sorted(set(self.types))
        fam_index = {f: i for i, f in enumerate(self.families)}
        self._fam = np.array([fam_index[f] for f in self.types], dtype=np.int64)
        self._read = np.array(self.read_per_token, dtype=np.float64)
        self._elems = np.array(self.elems_per_token, dtype=np.float64)
        self._flops = np.array(self.flops_per_token, dtype=np.float64)
        self._nbytes = np.array([float(t.nbytes) for t in model.tensors], dtype=np.float64)
        self._expert = np.array(self.expert, dtype=bool)
        ffn = [
            layer is not None and not nextn and role in (Role.FFN, Role.EXPERTS) for layer, role, nextn in self.roles
        ]
        self._ffn = np.array(ffn, dtype=bool)
        self._layer = np.array([-1 if layer is None else layer for layer, _, _ in self.roles], dtype=np.int64)
        self._ffn_w = np.where(self._expert, self._nbytes * frac, self._nbytes) * self._ffn
        self._digests: dict[tuple, _Digest] = {}

    def digest(self, wp: WeightPlacement) -> _Digest:
        """Everything the speed model needs of ``wp``, per device, computed once per placement (a small cache:
        a board update predicts decode, prompt and all-slots-busy for the same placement)."""
        key = (tuple(wp.tensor_device), tuple(wp.layer_device))
        got = self._digests.get(key)
        if got is None:
            got = _Digest(self, wp)
            if len(self._digests) >= 16:
                self._digests.pop(next(iter(self._digests)))
            self._digests[key] = got
        return got


class _Digest:
    """Per-device sums of one placement: bytes read, expert bytes, elements and FLOPs by type family, host bytes
    with FLOPs (copied to a GPU when prompts are offloaded), the token's device path and layer shares."""

    def __init__(self, f: SpeedFacts, wp: WeightPlacement):
        model = f.model
        names = sorted({d for d in wp.tensor_device if d})
        index = {d: i for i, d in enumerate(names)}
        index[""] = -1  # skipped tensors
        dev = np.array(list(map(index.__getitem__, wp.tensor_device)), dtype=np.int64)
        on = dev >= 0
        nd, nf = len(names), len(f.families)
        d_on, fam_on = dev[on], f._fam[on]

        def per_dev(w: np.ndarray) -> dict[str, float]:
            sums = np.bincount(d_on, weights=w[on], minlength=nd)
            return {n: float(sums[i]) for i, n in enumerate(names)}

        def per_dev_fam(w: np.ndarray) -> dict[str, dict[str, float]]:
            sums = np.bincount(d_on * nf + fam_on, weights=w[on], minlength=nd * nf).reshape(nd, nf)
            return {
                n: {fam: float(sums[i, j]) for j, fam in enumerate(f.families) if sums[i, j]}
                for i, n in enumerate(names)
            }

        self.bytes = per_dev(f._read)
        self.expert_bytes = per_dev(f._read * f._expert)
        self.elems = per_dev_fam(f._elems)
        self.flops = per_dev_fam(f._flops)
        cpu_i = index.get(CPU, -1)
        self.host_flop_bytes = float(f._nbytes[(dev == cpu_i) & (f._flops > 0)].sum()) if cpu_i >= 0 else 0.0
        # the token's path: per layer its attention's device, then the devices of its FFN by bytes read
        p = model.params
        n = p.n_layer - p.nextn_layers
        sel = on & f._ffn & (f._layer >= 0) & (f._layer < n)
        ffn = np.bincount(f._layer[sel] * nd + dev[sel], weights=f._ffn_w[sel], minlength=max(n, 1) * nd)
        ffn = ffn.reshape(max(n, 1), nd)
        # each layer's FFN devices by bytes read, most first (ties: in name order)
        order = np.argsort(-ffn[:n], axis=1, kind="stable")
        read = np.take_along_axis(ffn[:n], order, axis=1) > 0
        path = [CPU]
        for il, (row, on_row) in enumerate(zip(order.tolist(), read.tolist())):
            path.append(wp.layer_device[il])
            path.extend(names[j] for j, r in zip(row, on_row) if r)
        path.append(wp.layer_device[p.n_layer])
        path.append(CPU)
        self.path = path
        share: dict[str, float] = {}
        for il in range(n):
            share[wp.layer_device[il]] = share.get(wp.layer_device[il], 0.0) + 1.0 / max(n, 1)
        self.layer_share = share


def _facts(model: Model, facts: SpeedFacts | None) -> SpeedFacts:
    return facts if facts is not None and facts.model is model else SpeedFacts(model)


def read_bytes_per_token(model: Model, wp: WeightPlacement, facts: SpeedFacts | None = None) -> dict[str, float]:
    """Weight bytes each device reads for one decoded token."""
    return dict(_facts(model, facts).digest(wp).bytes)


def decode_elements(
    model: Model, wp: WeightPlacement, params: SpeedParams, facts: SpeedFacts | None = None, n_seq: int = 1
) -> dict[str, float]:
    """Per device, the weight elements its decode kernels process for one step of ``n_seq`` sequences,
    weighted by the device's per-type cost (1 where none was fitted)."""
    dig = _facts(model, facts).digest(wp)
    out: dict[str, float] = {}
    for dev, fams in dig.elems.items():
        cost = params.get(dev).type_cost
        out[dev] = sum(e * cost.get(fam, 1.0) for fam, e in fams.items()) * n_seq
    return {d: v for d, v in out.items() if v}


def layer_path(model: Model, wp: WeightPlacement, facts: SpeedFacts | None = None) -> list[str]:
    """The devices a token's computation visits, in order (embedding, each layer's attention and FFN, output)."""
    return list(_facts(model, facts).digest(wp).path)


def hop_cost(a: DeviceSpeed, b: DeviceSpeed, n_embd: int, tokens: int = 1) -> float:
    payload = n_embd * 4 * tokens
    if a.kind == "rpc" or b.kind == "rpc":
        link = a if a.kind == "rpc" else b
        return link.link_latency + payload / link.link_bandwidth
    gpu = a if a.kind != "cpu" else b
    return gpu.link_latency + payload / gpu.link_bandwidth


def _layer_share(model: Model, wp: WeightPlacement, facts: SpeedFacts | None = None) -> dict[str, float]:
    """The fraction of the model's attention layers each device runs (its share of the KV cache work)."""
    return _facts(model, facts).digest(wp).layer_share


def _attended(facts: SpeedFacts, depth: float) -> float:
    """Cached tokens one token attends to, averaged over the layers (sliding-window layers see at most the
    window)."""
    if not facts.swa_window:
        return depth
    return (1 - facts.swa_share) * depth + facts.swa_share * min(depth, facts.swa_window)


def predict_decode(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    kv_bytes: dict[str, float] | None = None,
    depth: int = 0,
    kv_cells: int = 1,
    facts: SpeedFacts | None = None,
    threads: int | None = None,
    n_seq: int = 1,
) -> DecodePrediction:
    """Tokens/s at batch 1 (``n_seq`` > 1: the aggregate rate of that many sequences decoding together).

    ``kv_bytes`` per device and ``depth``/``kv_cells`` give the KV share read per token; ``threads`` is the
    host's -t."""
    facts = _facts(model, facts)
    per_dev = read_bytes_per_token(model, wp, facts)
    if n_seq > 1 and model.params.n_expert:  # n tokens route to more distinct experts than one does
        p = model.params
        k, e = p.n_expert_used, p.n_expert
        touched = e * (1 - (1 - k / e) ** n_seq) / k
        for dev in list(per_dev):
            experts = facts.digest(wp).expert_bytes.get(dev, 0.0)
            per_dev[dev] += experts * (touched - 1)
    share = _layer_share(model, wp, facts)
    if kv_bytes and depth > 0:
        for dev, kv in kv_bytes.items():
            per_dev[dev] = per_dev.get(dev, 0.0) + n_seq * kv * min(1.0, _attended(facts, depth) / max(kv_cells, 1))
    elif depth > 0:  # an f16 cache on the layers' devices
        for dev, sh in share.items():
            per_dev[dev] = per_dev.get(dev, 0.0) + n_seq * facts.kv_bytes_per_cell * sh * _attended(facts, depth)
    elems = decode_elements(model, wp, params, facts, n_seq)
    attn = facts.attn_flops_per_cell * _attended(facts, depth) * n_seq / 2  # multiply-adds
    secs: dict[str, float] = {}
    for dev in set(per_dev) | set(elems):
        d = params.get(dev)
        if d.is_cpu:
            t = per_dev.get(dev, 0.0) / d.ram_rate(threads if dev == CPU else None)
        else:
            t = per_dev.get(dev, 0.0) / (d.bandwidth * d.eff_bandwidth)
        if d.is_cpu:
            work = elems.get(dev, 0.0) + attn * share.get(dev, 0.0) * d.type_cost.get(ATTENTION, 1.0)
            t += work / d.vec_rate(threads if dev == CPU else None)
        secs[dev] = t
    path = layer_path(model, wp, facts)
    hops, hop_s = 0, 0.0
    for a, b in zip(path, path[1:]):
        if a != b:
            hops += 1
            hop_s += hop_cost(params.get(a), params.get(b), model.params.n_embd, n_seq)
    total = sum(secs.values()) + hop_s + params.token_overhead
    return DecodePrediction(n_seq / total, total, secs, per_dev, hops, hop_s)


def prompt_work(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    n_ubatch: int = 512,
    op_offload: bool = True,
    facts: SpeedFacts | None = None,
    depth: int = 0,
) -> tuple[dict[str, float], float, str | None]:
    """FLOPs per device for one micro-batch (weighted by the device's per-type prompt cost, 1 where none was
    fitted; attention over ``depth`` cached tokens and the batch itself included), host bytes copied to the
    GPU, and the GPU they go to."""
    f = _facts(model, facts)
    gpus = [d for d in wp.devices if params.get(d.name).kind == "gpu"]
    offload = op_offload and bool(gpus) and n_ubatch >= OP_OFFLOAD_MIN_BATCH
    target = gpus[0].name if offload else None
    dig = f.digest(wp)
    flops: dict[str, float] = {}
    host_bytes = dig.host_flop_bytes if target is not None else 0.0
    for dev, fams in dig.flops.items():
        run_on = target if dev == CPU and target is not None else dev  # target is set exactly when offloading
        cost = params.get(run_on).type_cost_pp
        total = sum(fl * cost.get(fam, 1.0) for fam, fl in fams.items()) * n_ubatch
        if total:
            flops[run_on] = flops.get(run_on, 0.0) + total
    attn = f.attn_flops_per_cell * n_ubatch * _attended(f, depth + n_ubatch / 2)
    for dev, share in dig.layer_share.items():
        flops[dev] = flops.get(dev, 0.0) + attn * share * params.get(dev).type_cost_pp.get(ATTENTION, 1.0)
    return flops, host_bytes, target


def predict_prompt(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    n_ubatch: int = 512,
    op_offload: bool = True,
    facts: SpeedFacts | None = None,
    threads: int | None = None,
    depth: int = 0,
    n_prompt: int | None = None,
) -> PromptPrediction:
    """Prompt-processing tokens/s for a prompt of ``n_prompt`` tokens (default: one full micro-batch) in
    micro-batches of ``n_ubatch`` after ``depth`` cached tokens; ``threads`` is the host's -t."""
    n_prompt = n_prompt or n_ubatch
    total, transfer_all, offloaded = 0.0, 0.0, False
    secs: dict[str, float] = {}
    done = 0
    while done < n_prompt:
        ub = min(n_ubatch, n_prompt - done)
        flops, host_bytes, target = prompt_work(model, wp, params, ub, op_offload, facts, depth + done)
        offloaded = offloaded or target is not None
        for dev, fl in flops.items():
            d = params.get(dev)
            rate = d.cpu_flops(threads if dev == CPU else None) if d.is_cpu else d.effective_flops
            secs[dev] = secs.get(dev, 0.0) + fl / rate
        transfer = host_bytes / params.get(target).link_bandwidth if target is not None and host_bytes else 0.0
        transfer_all += transfer
        done += ub
    total = sum(secs.values()) + transfer_all + params.token_overhead * -(-n_prompt // n_ubatch)
    per_ubatch = total / -(-n_prompt // n_ubatch)
    return PromptPrediction(n_prompt / total, per_ubatch, secs, transfer_all, offloaded)


def predict(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    work: Workload,
    facts: SpeedFacts | None = None,
    kv_bytes: dict[str, float] | None = None,
    kv_cells: int = 1,
) -> DecodePrediction | PromptPrediction:
    """The rate llama-bench reports for ``work``: prompt tokens/s when it has a prompt and no generation,
    else generated tokens/s (aggregate over ``n_seq`` sequences)."""
    if work.n_prompt and not work.n_gen:
        return predict_prompt(model, wp, params, work.n_ubatch, True, facts, work.threads, work.depth, work.n_prompt)
    depth = work.depth + work.n_prompt + work.n_gen // 2  # the prompt (if any) is in the cache
    return predict_decode(model, wp, params, kv_bytes, depth, kv_cells, facts, threads=work.threads, n_seq=work.n_seq)
