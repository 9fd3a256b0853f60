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

from ..lanes import CPU
from ..memory.layout import WeightPlacement
from ..model import Model, Role

GB = 1e9
OP_OFFLOAD_MIN_BATCH = 32  # GGML_OP_OFFLOAD_MIN_BATCH (ggml/src/ggml-backend.cpp)


@dataclass
class DeviceSpeed:
    """What the speed model knows about one device (``CPU`` for the host)."""

    name: str
    kind: str = "gpu"  # gpu | cpu | rpc
    bandwidth: float = 500 * GB  # bytes/s, memory
    flops: float = 0.0  # FLOP/s usable for matmuls; 0 = derive from bandwidth
    link_bandwidth: float = 25 * GB  # bytes/s to the host (PCIe) or over the network (RPC)
    link_latency: float = 60e-6  # s per crossing (sync + launch; network round trip for RPC)
    eff_bandwidth: float = 0.70  # fitted by calibration; 0.5 for host RAM (see docs/speed-model.md)
    eff_flops: float = 0.45
    flops_per_byte: float = 0.0  # compute per byte of bandwidth when flops is unknown; 0 = by kind

    @property
    def nominal_flops(self) -> float:
        ratio = self.flops_per_byte or (8.0 if self.kind == "cpu" else 100.0)  # see docs/speed-model.md
        return self.flops or self.bandwidth * ratio

    @property
    def effective_flops(self) -> float:
        return self.nominal_flops * self.eff_flops


@dataclass
class SpeedParams:
    devices: dict[str, DeviceSpeed]
    token_overhead: float = 1.5e-3  # s per token: graph launch, sampling, host work

    def get(self, name: str) -> DeviceSpeed:
        d = self.devices.get(name)
        if d is None:
            d = self.devices[name] = (
                DeviceSpeed(name, "cpu", 60 * GB, eff_bandwidth=0.5) if name == CPU else DeviceSpeed(name, "gpu")
            )
        return d


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
    """Per-tensor constants of one model for the speed model: bytes read and FLOPs per token.

    Whoever predicts many placements of one model (a session, the fastest search, calibration) builds one
    and passes it to :func:`predict_decode` / :func:`predict_prompt`."""

    def __init__(self, model: Model):
        p = model.params
        frac = p.n_expert_used / p.n_expert if p.n_expert else 1.0
        self.model = model
        self.roles = [(b.layer, b.role, b.nextn) for b in model.index.tensor_block]
        self.read_per_token: list[float] = []
        self.flops_per_token: list[float] = []
        for t, (_layer, role, nextn) in zip(model.tensors, self.roles):
            if nextn:
                self.read_per_token.append(0.0)
            elif role is Role.EXPERTS:
                self.read_per_token.append(t.nbytes * frac)
            elif role is Role.INPUT:
                self.read_per_token.append(t.nbytes / max(p.n_vocab, 1))  # one row per token
            else:
                self.read_per_token.append(float(t.nbytes))
            if nextn or role is Role.INPUT:
                self.flops_per_token.append(0.0)
            else:  # each token uses n_used experts; a micro-batch touches (nearly) every expert's weights
                self.flops_per_token.append(2.0 * t.n_elements * (frac if role is Role.EXPERTS else 1.0))


def _facts(model: Model, facts: SpeedFacts | None) -> SpeedFacts:
    return facts if facts is not None and facts.model is model else SpeedFacts(model)


def read_bytes_per_token(model: Model, wp: WeightPlacement, facts: SpeedFacts | None = None) -> dict[str, float]:
    """Weight bytes each device reads for one decoded token."""
    out: dict[str, float] = {}
    for b, dev in zip(_facts(model, facts).read_per_token, wp.tensor_device):
        if dev:
            out[dev] = out.get(dev, 0.0) + b
    return out


def layer_path(model: Model, wp: WeightPlacement, facts: SpeedFacts | None = None) -> list[str]:
    """The devices a token's computation visits, in order (embedding, each layer's attention and FFN, output)."""
    p = model.params
    attn_dev: dict[int, str] = {}
    ffn_bytes: dict[int, dict[str, float]] = {}
    frac = p.n_expert_used / p.n_expert if p.n_expert else 1.0
    for t, dev, (layer, role, nextn) in zip(model.tensors, wp.tensor_device, _facts(model, facts).roles):
        if layer is None or not dev or nextn:
            continue
        if role in (Role.ATTN, Role.SSM):
            attn_dev.setdefault(layer, wp.layer_device[layer])
        elif role in (Role.FFN, Role.EXPERTS):
            w = t.nbytes * (frac if role is Role.EXPERTS else 1.0)
            d = ffn_bytes.setdefault(layer, {})
            d[dev] = d.get(dev, 0.0) + w
    path = [CPU]
    for il in range(p.n_layer - p.nextn_layers):
        path.append(attn_dev.get(il, wp.layer_device[il]))
        # the FFN's ops run where their weights are; a layer split across devices visits each
        for dev, _ in sorted(ffn_bytes.get(il, {}).items(), key=lambda kv: -kv[1]):
            path.append(dev)
    path.append(wp.layer_device[p.n_layer])
    path.append(CPU)  # logits back to the host for sampling
    return path


def hop_cost(a: DeviceSpeed, b: DeviceSpeed, n_embd: int, tokens: int = 1) -> float:
    payload = n_embd * 4 * tokens
    if a.kind == "rpc" or b.kind == "rpc":
        link = a if a.kind == "rpc" else b
        return link.link_latency + payload / link.link_bandwidth
    gpu = a if a.kind != "cpu" else b
    return gpu.link_latency + payload / gpu.link_bandwidth


def predict_decode(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    kv_bytes: dict[str, float] | None = None,
    depth: int = 0,
    kv_cells: int = 1,
    facts: SpeedFacts | None = None,
) -> DecodePrediction:
    """Tokens/s at batch 1. ``kv_bytes`` per device and ``depth``/``kv_cells`` give the KV share read per token."""
    facts = _facts(model, facts)
    per_dev = read_bytes_per_token(model, wp, facts)
    if kv_bytes and depth > 0:
        for dev, kv in kv_bytes.items():
            per_dev[dev] = per_dev.get(dev, 0.0) + kv * min(1.0, depth / max(kv_cells, 1))
    secs = {dev: b / (params.get(dev).bandwidth * params.get(dev).eff_bandwidth) for dev, b in per_dev.items()}
    path = layer_path(model, wp, facts)
    hops, hop_s = 0, 0.0
    for a, b in zip(path, path[1:]):
        if a != b:
            hops += 1
            hop_s += hop_cost(params.get(a), params.get(b), model.params.n_embd)
    total = sum(secs.values()) + hop_s + params.token_overhead
    return DecodePrediction(1.0 / total, total, secs, per_dev, hops, hop_s)


def prompt_work(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    n_ubatch: int = 512,
    op_offload: bool = True,
    facts: SpeedFacts | None = None,
) -> tuple[dict[str, float], float, str | None]:
    """FLOPs per device for one micro-batch, host bytes copied to the GPU, and the GPU they go to."""
    gpus = [d for d in wp.devices if params.get(d.name).kind == "gpu"]
    offload = op_offload and bool(gpus) and n_ubatch >= OP_OFFLOAD_MIN_BATCH
    target = gpus[0].name if offload else None
    flops: dict[str, float] = {}
    host_bytes = 0.0
    for f, t, dev in zip(_facts(model, facts).flops_per_token, model.tensors, wp.tensor_device):
        if not dev or not f:
            continue
        run_on = dev
        if dev == CPU and target is not None:  # target is set exactly when offloading
            run_on = target
            host_bytes += t.nbytes
        flops[run_on] = flops.get(run_on, 0.0) + f * n_ubatch
    return flops, host_bytes, target


def predict_prompt(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    n_ubatch: int = 512,
    op_offload: bool = True,
    facts: SpeedFacts | None = None,
) -> PromptPrediction:
    """Prompt-processing tokens/s for full micro-batches of ``n_ubatch`` tokens."""
    flops, host_bytes, target = prompt_work(model, wp, params, n_ubatch, op_offload, facts)
    offload = target is not None
    secs = {dev: f / params.get(dev).effective_flops for dev, f in flops.items()}
    transfer = host_bytes / params.get(target).link_bandwidth if target is not None and host_bytes else 0.0
    total = sum(secs.values()) + transfer + params.token_overhead
    return PromptPrediction(n_ubatch / total, total, secs, transfer, offload)
