"""The llama.cpp settings that change memory, with llama.cpp's defaults per tool.

Defaults follow ``common/common.h`` (``common_params``) and the tools' own
adjustments: the server's auto ``-np`` means 4 slots sharing one unified KV
cache (``tools/server/server.cpp``); the server reserves logits for its slots
(and, with speculative decoding, for each slot's drafted tokens) while other
tools reserve them for a full batch (``server_output_limits`` in
``tools/server/server-context.cpp`` vs ``n_outputs_max = n_batch`` in
``src/llama-context.cpp``).

The ``draft_*`` fields are a draft model's own flags (``-md``, ``-ngld``,
``-devd``, ``-otd``/``-cmoed``/``-ncmoed``, ``-ctkd``/``-ctvd``); what the
draft's context inherits from the main model's is :func:`app.memory.draft.draft_settings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

TOOLS = ("server", "fit-params", "cli", "bench")
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
#: --spec-type names (``common_speculative_type_from_name_map``, common/speculative.cpp).
#: --spec-type values whose drafts roll the target's recurrent state back per token (``need_n_rs_seq``)
RS_SEQ_SPEC_TYPES = frozenset({"draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark"})
SPEC_TYPES = (
    "none",
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
#: Drafted tokens of the ngram types at llama.cpp's defaults (``common_speculative_n_max``: their ``size_m``,
#: ``ngram_mod.n_max``, 8 for the cache); the draft types use ``--spec-draft-n-max``.
SPEC_TYPE_N_MAX = {"ngram-simple": 48, "ngram-map-k": 48, "ngram-map-k4v": 48, "ngram-mod": 64, "ngram-cache": 8}
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
    draft_model: str | None = None  # -md FILE (speculative decoding with a draft model)
    draft_n_gpu_layers: int = NGL_AUTO  # -ngld
    draft_devices: list[str] | None = None  # -devd (None: follows -dev)
    draft_overrides: list[tuple[str, str]] = field(default_factory=list)  # -otd, -cmoed, -ncmoed in order
    draft_type_k: str = "f16"  # -ctkd (not inherited from -ctk)
    draft_type_v: str = "f16"  # -ctvd
    spec_types: list[str] = field(default_factory=list)  # --spec-type, in order ("none" left out)
    spec_draft_n_max: int = 3  # --spec-draft-n-max
    #: --no-spec-draft-backend-sampling turns off the draft's top-k sampling in its own graph (MTP context)
    spec_draft_backend_sampling: bool = True
    mmproj: str | None = None  # --mmproj FILE (the multimodal projector, app.memory.projector)
    mmproj_offload: bool = True  # --no-mmproj-offload keeps it on the CPU
    mmproj_device: str | None = None  # -mmdev DEVICE (None: the first of -dev, else the first GPU; "none": CPU)
    image_min_tokens: int | None = None  # --image-min-tokens (dynamic-resolution vision encoders)
    image_max_tokens: int | None = None  # --image-max-tokens

    def copy(self, **changes) -> LlamaSettings:
        changes.setdefault("overrides", list(self.overrides))
        changes.setdefault("draft_overrides", list(self.draft_overrides))
        changes.setdefault("spec_types", list(self.spec_types))
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

    @property
    def spec_n_max(self) -> int:
        """Tokens drafted per step at most (``common_speculative_n_max``): the largest of the chosen types'
        sizes, the ngram types at their defaults (``common/common.h``)."""
        return max((SPEC_TYPE_N_MAX.get(t, self.spec_draft_n_max) for t in self.spec_types), default=0)

    @property
    def load_mtp(self) -> bool:
        """``--spec-type draft-mtp``: llama-server loads the NextN/MTP layers' weights too (``mparams.load_mtp``,
        ``common_model_params_to_llama``) and runs them in a second context (``LLAMA_CONTEXT_TYPE_MTP``)."""
        return self.tool == "server" and "draft-mtp" in self.spec_types

    @property
    def rs_seq_requested(self) -> int:
        """Recurrent-state snapshots per sequence the main context asks for (``need_n_rs_seq``): the
        ``--spec-draft-n-max`` when a type that rolls the target's state back is chosen (MTP, EAGLE-3, DFlash,
        DSpark), else 0; llama.cpp clamps it to 0 for architectures without partial rollback."""
        if self.tool != "server" or not any(t in RS_SEQ_SPEC_TYPES for t in self.spec_types):
            return 0
        return self.spec_draft_n_max

    def eff_n_outputs_max(self) -> int:
        """The main context's output rows: a server reserves ``n_parallel * (1 + drafted tokens)``
        (``server_output_limits`` with ``common_speculative_get_output_limits``), capped at ``-b`` by the
        caller; the other tools a full batch."""
        if self.tool == "server":
            return max(1, self.eff_n_parallel * (1 + self.spec_n_max))
        return self.n_batch
