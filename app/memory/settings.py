"""The llama.cpp settings that change memory, with llama.cpp's defaults per tool.

Defaults follow ``common/common.h`` (``common_params``) and the tools' own
adjustments: the server's auto ``-np`` means 4 slots sharing one unified KV
cache (``tools/server/server.cpp``); the server reserves logits for its slots
while other tools reserve them for a full batch (``server_output_limits`` vs
``n_outputs_max = n_batch`` in ``src/llama-context.cpp``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

TOOLS = ("server", "fit-params", "cli", "bench")
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
#: -ngl values with a meaning of their own (llama.h / common/arg.cpp).
NGL_AUTO = -1
NGL_ALL = -2


@dataclass
class LlamaSettings:
    """Memory-relevant llama.cpp arguments. ``None`` means "not given: llama.cpp's default"."""

    n_ctx: int = 0  # -c; 0 = the model's training context
    n_parallel: int = -1  # -np; -1 = server auto (4, unified)
    kv_unified: bool | None = None  # -kvu / -no-kvu
    type_k: str = "f16"  # -ctk
    type_v: str = "f16"  # -ctv
    flash_attn: str = "auto"  # -fa on|off|auto
    n_batch: int = 2048  # -b
    n_ubatch: int = 512  # -ub
    swa_full: bool = False  # --swa-full
    no_kv_offload: bool = False  # -nkvo
    n_gpu_layers: int = NGL_AUTO  # -ngl N | auto (-1) | all (-2)
    tensor_split: list[float] | None = None  # -ts
    devices: list[str] | None = None  # -dev; ["none"] = CPU only
    split_mode: str = "layer"  # -sm
    main_gpu: int = 0  # -mg
    overrides: list[tuple[str, str]] = field(default_factory=list)  # -ot, -cmoe, -ncmoe in order
    repack: bool = True  # --no-repack turns it off
    use_host: bool = True  # --no-host turns it off
    op_offload: bool = True  # --no-op-offload
    n_threads: int | None = None  # -t (no memory effect; kept for export)
    load_mode: str | None = None  # -lm none|mmap|mlock|... (None: llama.cpp's auto)
    tool: str = "server"

    def copy(self, **changes) -> LlamaSettings:
        changes.setdefault("overrides", list(self.overrides))
        return replace(self, **changes)

    # ---- effective values, as the chosen tool resolves them

    @property
    def eff_n_parallel(self) -> int:
        if self.n_parallel is None or self.n_parallel < 0:
            return 4 if self.tool == "server" else 1
        return max(1, self.n_parallel)

    @property
    def eff_kv_unified(self) -> bool:
        if self.tool == "server" and (self.n_parallel is None or self.n_parallel < 0):
            return True  # auto -np forces a unified cache
        return bool(self.kv_unified)

    def eff_n_outputs_max(self) -> int:
        if self.tool == "server":
            return self.eff_n_parallel
        return self.n_batch
