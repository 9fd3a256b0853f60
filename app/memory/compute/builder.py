"""What every architecture's graph is built from: ``llm_graph_context`` of ``src/llama-graph.cpp``.

:class:`Builder` holds the weights (with the tensor index of the model), the graph inputs and the KV-cache
views, and builds the shared pieces: ``build_inp_*``, ``build_attn``/``build_attn_mha``, ``build_ffn``,
``build_moe_ffn`` and the output. :func:`qkv` and :func:`rope` are the small helpers most ``models/*.cpp``
share. The per-architecture layer loops live in :mod:`app.memory.compute.models`.
"""

from __future__ import annotations

from .ggml import (
    INPUT,
    NONE,
    OUTPUT,
    Graph,
    T,
    argsort_top_k,
    binary,
    cont,
    dup,
    flash_attn_ext,
    get_rows,
    glu_split,
    is_contiguous,
    mul_mat,
    mul_mat_id,
    nelements,
    new,
    pad,
    permute,
    reshape,
    row_size,
    set_rows,
    sum_rows,
    transpose,
    unary,
    view,
)


class Builder:
    """What the architecture builders need: weights with their backends, inputs, KV views, helpers."""

    all: list[T]  # nodes then leafs, set by compute_buffers once the graph is built

    def __init__(self, ctx, layers):
        self.c = ctx
        self.p = ctx.p
        self.g = Graph()
        self.layers = layers  # the layer indices to build (a compressed run keeps a few)
        self.pos = {il: k for k, il in enumerate(layers)}
        self.last = ctx.p.n_layer - 1 - ctx.n_nextn
        self.nt = ctx.n_tokens
        self.inputs = {}
        self.wcache = {}
        # placement-dependent parts, filled in per call by _run
        self.wrefs = []  # (tensor, kept-layer position or -1, name suffix or full name)
        self.pwrefs = []  # T5's enc.blk.N / dec.blk.N weights: (tensor, kept-layer position, "enc." or "dec.", suffix)
        self.crefs = []  # (cache tensor, kept-layer position)
        self.pins = []  # (norm tensor, kept-layer position): graph_get_cb pins
        self.cpu_pins = []  # attention outputs run on the CPU with -nkvo

    # leafs -------------------------------------------------------------

    def w(self, name):
        """The weight tensor ``name`` (one tensor per name, as in the model), or None if the model lacks it."""
        t = self.wcache.get(name, 0)
        if t != 0:
            return t
        c = self.c
        i = c.names.get(name)
        if i is None:
            lent = self.__dict__.get("borrowed", {}).get(name)
            if lent is not None:  # another model's tensor in its buffer (compute_buffers' ``borrowed``)
                t = T("w", lent[0], (0, 0, 0, 0), NONE, [])
                t.name = name
                self.__dict__.setdefault("brefs", []).append((t, name))
                self.wcache[name] = t
                return t
            if name != "token_embd.weight@output" or "output.weight" in c.names:
                self.wcache[name] = None
                return None
            i = c.names.get("token_embd.weight")
            if i is None:
                return None
        t = T("w", c.shapes[i], (0, 0, 0, 0), NONE, [])
        t.name = name
        if name.startswith("blk."):
            _, il, sfx = name.split(".", 2)
            self.wrefs.append((t, self.pos[int(il)], sfx))
        elif name.startswith(("enc.blk.", "dec.blk.")):
            pre, _, il, sfx = name.split(".", 3)
            self.pwrefs.append((t, self.pos[int(il)], pre + ".", sfx))
        else:
            self.wrefs.append((t, -1, name))
        self.wcache[name] = t
        return t

    def inp(self, key, ty, ne):
        t = self.inputs.get(key)
        if t is None:
            t = new(ty, ne, NONE)
            t.flags = t.fl0 = INPUT
            t.name = key
            self.inputs[key] = t
        return t

    def cache(self, il, which, ty, ne):
        t = new(ty, ne, NONE)
        t.size = 0
        t.name = f"cache_{which}_l{il}"
        self.crefs.append((t, self.pos[il]))
        return t

    # helpers -------------------------------------------------------------

    def force_norm(self, t, il):
        if il >= 0:
            self.pins.append((t, self.pos[il]))
        return t

    #: the op of ``build_norm`` for this model: LLM_NORM_RMS ("RMS_NORM") or LLM_NORM ("NORM", a layer norm; not in
    #: ``ggml_op_can_inplace``, so unlike RMS_NORM it never takes its input's memory); a family's build sets it
    norm_op = "RMS_NORM"

    def norm(self, x, wname, il, mb=None):
        """``build_norm``: :attr:`norm_op`, then the weight and the bias."""
        w = self.w(wname) if isinstance(wname, str) else wname
        cur = unary(self.norm_op, x)
        if w is not None or mb is not None:
            self.force_norm(cur, il)
        if w is not None:
            cur = binary("MUL", cur, w)
        if mb is not None:
            cur = binary("ADD", cur, mb)
        return cur

    def mm(self, wname, x):
        w = self.w(wname) if isinstance(wname, str) else wname
        return mul_mat(w, x)

    def mm_s(self, w, x):
        """``build_lora_mm(w, x, w_s)``: the product, then the weight's per-tensor scale where the file has one
        (``<name>.scale``, which llama_model::load_tensors' generic pass loads for any architecture: NVFP4's
        second scale, BitNet's)."""
        w = self.w(w) if isinstance(w, str) else w
        cur = mul_mat(w, x)
        name = getattr(w, "name", None) or ""
        scale = self.w(name[: -len(".weight")] + ".scale") if name.endswith(".weight") else None
        return binary("MUL", cur, scale) if scale is not None else cur

    def add_b(self, x, bname):
        b = self.w(bname)
        return binary("ADD", x, b) if b is not None else x

    # inputs (llm_graph_context::build_inp_*) -----------------------------

    def inp_embd(self):
        p, nt = self.p, self.nt
        tokens = self.inp("inp_tokens", "i32", (nt,))
        embd = self.inp("inp_embd", "f32", (p.n_embd, nt))
        cur = get_rows(self.w("token_embd.weight"), tokens)
        self.g.expand(cur)
        self.g.expand(embd)  # the vector-embeddings path: a leaf that is never used
        if self.c.embedding_scale:
            cur = unary("SCALE", cur)
        self.g.expand(cur)
        return cur

    def inp_pos(self):
        return self.inp("inp_pos", "i32", (self.nt,))

    def inp_out_ids(self):
        return self.inp("out_ids", "i32", (self.c.n_outputs,))

    # attention (build_attn / build_attn_mha) -----------------------------

    def kv_dims(self, il):
        c, p = self.c, self.p
        swa = c.is_swa(il)
        hk = p.head_dim_k_swa if swa else p.head_dim_k
        hv = p.head_dim_v_swa if swa else p.head_dim_v
        return hk, hv, p.n_head_kv[il], swa

    def attn_inputs(self, swa):
        """k_idxs, v_idxs, mask, k_rot, v_rot of the (SWA or base) cache."""
        c, nt = self.c, self.nt
        sfx = "_swa" if swa else ""
        n_kv = c.size_swa if swa else c.n_kv
        k_idxs = self.inp("k_idxs" + sfx, "i64", (nt,))
        v_idxs = None
        if not c.mla:
            # llama_kv_cache::build_input_v_idxs: by the cache's layout (v_trans), not by the attention op
            v_idxs = self.inp("v_idxs" + sfx, "i64", (nt,) if not c.v_trans else (nt * c.n_embd_v_gqa_max,))
        ns = c.n_stream
        mask = self.inp("kq_mask" + sfx, "f16" if c.fa else "f32", (n_kv, nt // ns, 1, ns))
        k_rot = v_rot = None
        if c.rot_k and not c.mla:  # build_attn_inp_k (MLA) makes no rotation inputs
            k_rot = self.inp("k_rot" + sfx, "f32", (c.rot_k, c.rot_k))
        if c.rot_v and not c.mla:
            v_rot = self.inp("v_rot" + sfx, "f32", (64, 64))
        return k_idxs, v_idxs, mask, k_rot, v_rot, n_kv

    def hadamard(self, cur, rot):
        n = rot.ne[0]
        if not is_contiguous(cur):
            res = cont(cur, n, nelements(cur) // n)
        else:
            res = reshape(cur, n, nelements(cur) // n)
        res = mul_mat(rot, res)
        return reshape(res, *cur.ne)

    def attn(self, il, q, k, v, wo, wo_b, sinks=None, v_mla=None, iswa_order=False, kq_b=None):
        """``build_attn`` for a KV cache (``llm_graph_input_attn_kv[_iswa]`` / ``_k`` for MLA); the output
        projection is ``build_lora_mm(wo, cur, wo_s)``, with the file's scale of ``wo`` where it has one; ``kq_b``:
        a bias added to KQ (T5's relative positions), which keeps the attention off flash attention."""
        c, g = self.c, self.g
        hk, hv, n_head_kv, swa = self.kv_dims(il)
        k_idxs, v_idxs, mask, k_rot, v_rot, n_kv = self.attn_inputs(swa)
        if k_rot is not None:
            q = self.hadamard(q, k_rot)
            k = self.hadamard(k, k_rot)
        if v_rot is not None:
            v = self.hadamard(v, v_rot)
        g.expand(q)
        if iswa_order:
            g.expand(k)
            g.expand(v)
        else:
            g.expand(v)
            g.expand(k)
        ns = c.n_stream
        kv_size = c.size_swa if swa else c.n_kv
        n_embd_k = hk * n_head_kv
        kc = self.cache(il, "k", c.type_k, (n_embd_k, kv_size, ns))
        # cpy_k
        k2 = view(k, (n_embd_k, k.ne[2]), (k.nb[2],))
        dst = reshape(kc, n_embd_k, kv_size * ns) if ns > 1 else kc
        g.expand(set_rows(dst, k2, k_idxs))
        if c.mla:
            kview = view(
                kc,
                (hk, n_head_kv, n_kv, ns),
                (row_size(c.type_k, hk), row_size(c.type_k, n_embd_k), row_size(c.type_k, n_embd_k * kv_size)),
            )
            vview = view(kview, (v.ne[0], kview.ne[1], kview.ne[2], kview.ne[3]), kview.nb[1:])
        else:
            n_embd_v = c.n_embd_v_gqa_max if c.v_trans else hv * n_head_kv  # cpy_v / get_v follow v_trans
            vc = self.cache(il, "v", c.type_v, (n_embd_v, kv_size, ns))
            n_embd_gqa = v.ne[0] * v.ne[1]
            if not c.v_trans:
                v2 = view(v, (n_embd_gqa, v.ne[2]), (v.nb[2],))
                vdst = reshape(vc, n_embd_gqa, kv_size * ns) if ns > 1 else vc
                g.expand(set_rows(vdst, v2, v_idxs))
            else:
                if row_size(v.ty, n_embd_gqa) == v.nb[2] and is_contiguous(v):
                    v2 = reshape(v, n_embd_gqa, v.ne[2])
                else:
                    v2 = cont(v, n_embd_gqa, v.ne[2])
                if n_embd_gqa < vc.ne[0]:
                    v2 = pad(v2, vc.ne[0] - n_embd_gqa)
                vdst = reshape(vc, 1, nelements(vc))
                v2 = reshape(v2, 1, nelements(v2))
                g.expand(set_rows(vdst, v2, v_idxs))
            kview = view(
                kc,
                (hk, n_head_kv, n_kv, ns),
                (row_size(c.type_k, hk), row_size(c.type_k, n_embd_k), row_size(c.type_k, n_embd_k * kv_size)),
            )
            if not c.v_trans:
                vview = view(
                    vc,
                    (hv, n_head_kv, n_kv, ns),
                    (row_size(c.type_v, hv), row_size(c.type_v, n_embd_v), row_size(c.type_v, n_embd_v * kv_size)),
                )
            else:
                vview = view(
                    vc,
                    (n_kv, n_head_kv, hv, ns),
                    (
                        row_size(c.type_v, kv_size * hv),
                        row_size(c.type_v, kv_size),
                        row_size(c.type_v, kv_size * n_embd_v),
                    ),
                )
        cur = self.mha(q, kview, vview, mask, sinks, v_mla, il, kq_b)
        if v_rot is not None:
            cur = self.hadamard(cur, v_rot)
        if wo is not None:
            cur = self.mm_s(wo, cur)
        if wo_b is not None:
            cur = binary("ADD", cur, wo_b)
        return cur

    def attn_no_cache(self, il, q, k, v, wo, wo_b):
        """``build_attn`` over ``llm_graph_input_attn_no_cache`` (no memory: the diffusion decoders): Q, K and V
        expanded together, one n_tokens x n_tokens mask (f16 for flash attention), attention over the ubatch's own
        K and V (cast to f16 for flash attention), then the output projection."""
        g, nt = self.g, self.nt
        g.expand(q)
        g.expand(k)
        g.expand(v)
        mask = self.inp("kq_mask_no_cache", "f16" if self.c.fa else "f32", (nt, nt, 1, 1))
        cur = self.mha(q, k, v, mask, None, None, il)
        if wo is not None:
            cur = self.mm_s(wo, cur)
        if wo_b is not None:
            cur = binary("ADD", cur, wo_b)
        return cur

    def mha(self, q, k, v, mask, sinks, v_mla, il, kq_b=None):
        """``build_attn_mha``: flash attention where the context has it and there is no KQ bias ``kq_b``
        (``use_flash_attn = cparams.flash_attn && kq_b == nullptr``), else KQ, the bias, softmax and KQV."""
        c, g = self.c, self.g
        v_trans = v.nb[1] > v.nb[2]
        ns = k.ne[3]
        q = view(q, (q.ne[0], q.ne[1], q.ne[2] // ns, ns), (q.nb[1], q.nb[2], q.nb[2] * (q.ne[2] // ns)))
        q = permute(q, 0, 2, 1, 3)
        k = permute(k, 0, 2, 1, 3)
        v = permute(v, 0, 2, 1, 3)
        if c.fa and kq_b is None:
            if v_trans:
                v = transpose(v)
            # "this can happen when KV cache is not used": f32 K and V are cast to f16 for the fused op
            if k.ty == "f32":
                k = new("f16", k.ne, "CPY", (k,))
            if v.ty == "f32":
                v = new("f16", v.ne, "CPY", (v,))
            cur = flash_attn_ext(q, k, v, mask, sinks)
            # build_attn_mha: res->add_fused_node({LLM_FUSED_OP_FLASH_ATTN, cur, il}) (llama-graph.cpp), the node
            # resolve_fused_ops checks for -fa auto (core.py)
            self.__dict__.setdefault("fused_nodes", []).append(("FLASH_ATTN", cur, self.pos[il]))
            if v_mla is not None:
                cur = permute(cur, 0, 2, 1, 3)
                cur = mul_mat(v_mla, cur)
                cur = permute(cur, 0, 2, 1, 3)
                cur = cont(cur)
            cur = reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        else:
            kq = mul_mat(k, q)
            if c.softcap:
                kq = unary("SCALE", kq)
                kq = unary("UNARY", kq)
                kq = unary("SCALE", kq)
            if kq_b is not None:
                kq = binary("ADD", kq, kq_b)
            src = (kq, mask) if sinks is None else (kq, mask, sinks)
            kq = dup(kq, "SOFT_MAX", src)
            if not v_trans:
                v = cont(transpose(v))
            kqv = mul_mat(v, kq)
            if v_mla is not None:
                kqv = mul_mat(v_mla, kqv)
            cur = permute(kqv, 0, 2, 1, 3)
            cur = cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
            self.cpu_pins.append(cur)
        g.expand(cur)
        return cur

    # feed-forward ---------------------------------------------------------

    def ffn(self, cur, pfx, il, act="silu", par=True, bias=True):
        """``build_ffn`` with optional biases and per-tensor scales (``<pfx>_up``, ``<pfx>_gate``, ``<pfx>_down``,
        each ``build_lora_mm(w, x, w_s)``); ``act`` matters only
        where it is more than one op: ``"relu_sqr"`` (LLM_FFN_RELU_SQR, ``ggml_relu`` then ``ggml_sqr``); ``bias``
        False: the graph passes no biases (refact.cpp)."""
        up = self.w(f"blk.{il}.{pfx}_up.weight")
        gate = self.w(f"blk.{il}.{pfx}_gate.weight")
        down = self.w(f"blk.{il}.{pfx}_down.weight")
        add_b = self.add_b if bias else (lambda x, _name: x)
        tmp = self.mm_s(up, cur) if up is not None else cur
        tmp = add_b(tmp, f"blk.{il}.{pfx}_up.bias")
        if gate is not None:
            x = tmp if not par else cur
            cur = self.mm_s(gate, x)
            cur = add_b(cur, f"blk.{il}.{pfx}_gate.bias")
            if par:
                cur = glu_split(cur, tmp)
            else:
                cur = unary("UNARY", cur)
        else:
            cur = unary("UNARY", tmp)
            if act == "relu_sqr":
                cur = unary("SQR", cur)
        if down is not None:
            cur = self.mm_s(down, cur)
        return add_b(cur, f"blk.{il}.{pfx}_down.bias")

    def moe(
        self,
        cur,
        il,
        gating="softmax",
        norm_w=False,
        w_scale=False,
        probs_b=None,
        before=False,
        probs_in=None,
        act=None,
        selected_in=None,
    ):
        """``build_moe_ffn``: router, top-k, expert matmuls, weighting and the sum over the selected experts
        (``probs_in``: router logits the model computed itself, e.g. from the layer input in smallthinker.cpp;
        ``act(gate, up)``: an activation of its own, e.g. kimi-k3's situ, instead of the fused GLU)."""
        c, g = self.c, self.g
        n_embd, nt = cur.ne[0], cur.ne[1]
        n_exp, k = c.n_expert, c.n_expert_used
        logits = probs_in if probs_in is not None else self.mm(f"blk.{il}.ffn_gate_inp.weight", cur)
        logits = self.add_b(logits, f"blk.{il}.ffn_gate_inp.bias")
        if gating == "softmax":
            probs = unary("SOFT_MAX", logits)
        elif gating == "sigmoid":
            probs = unary("UNARY", logits)
        elif gating == "sqrt_softplus":  # LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS: ggml_sqrt(ggml_softplus)
            probs = unary("SQRT", unary("UNARY", logits))
        else:  # softmax_weight
            probs = logits
        sel = probs
        if probs_b is not None:
            sel = binary("ADD", probs, probs_b)
        if before:
            sel = logits
        if c.n_expert_groups > 1 and nt > 0:
            npg = n_exp // c.n_expert_groups
            groups = reshape(sel, npg, c.n_expert_groups, nt)
            gs = argsort_top_k(groups, 2)
            gs = get_rows(reshape(groups, 1, groups.ne[0], groups.ne[1], groups.ne[2]), gs)
            gs = sum_rows(reshape(gs, gs.ne[1], gs.ne[2], gs.ne[3]))
            gs = reshape(gs, gs.ne[1], gs.ne[2])
            eg = argsort_top_k(gs, c.n_group_used)
            sp = get_rows(groups, eg)
            filled = unary("FILL", groups)
            sel = set_rows(filled, sp, eg)
            sel = reshape(sel, n_exp, nt)
        # selected_experts_in (deepseek4's hash layers: rows of ffn_gate_tid2eid by token) replaces the top-k
        selected = argsort_top_k(sel, k) if selected_in is None else selected_in
        probs3 = reshape(probs, 1, n_exp, nt)
        weights = get_rows(probs3, selected)
        if gating == "softmax_weight":
            weights = reshape(weights, k, nt)
            weights = unary("SOFT_MAX", weights)
            weights = reshape(weights, 1, k, nt)
        if norm_w:
            weights = reshape(weights, k, nt)
            wsum = sum_rows(weights)
            wsum = unary("CLAMP", wsum)
            weights = binary("DIV", weights, wsum)
            weights = reshape(weights, 1, k, nt)
        if w_scale:
            weights = unary("SCALE", weights)
        g.expand(weights)
        cur = reshape(cur, n_embd, 1, nt)
        if before:  # llama4 weighs the inputs: repeat to [n_embd, n_used, n_tokens] and scale
            cur = new(cur.ty, (n_embd, k, nt), "REPEAT", (cur,))
            cur = binary("MUL", cur, weights)
        gate_up = self.w(f"blk.{il}.ffn_gate_up_exps.weight")
        if gate_up is not None:
            gu = mul_mat_id(gate_up, cur, selected)
            nff = gu.ne[0] // 2
            gate = view(gu, (nff, gu.ne[1], gu.ne[2]), (gu.nb[1], gu.nb[2]))
            up = view(gu, (nff, gu.ne[1], gu.ne[2]), (gu.nb[1], gu.nb[2]))
        else:
            up = mul_mat_id(self.w(f"blk.{il}.ffn_up_exps.weight"), cur, selected)
            b = self.w(f"blk.{il}.ffn_up_exps.bias")
            if b is not None:
                up = dup(up, "ADD_ID", (up, b, selected))
            gw = self.w(f"blk.{il}.ffn_gate_exps.weight")
            if gw is not None:
                gate = mul_mat_id(gw, cur, selected)
                b = self.w(f"blk.{il}.ffn_gate_exps.bias")
                if b is not None:
                    gate = dup(gate, "ADD_ID", (gate, b, selected))
            else:
                gate = None
        if act is not None:
            act = act(gate, up)
        elif gate is not None:
            act = glu_split(gate, up)
        else:
            act = unary("UNARY", up)
        experts = mul_mat_id(self.w(f"blk.{il}.ffn_down_exps.weight"), act, selected)
        b = self.w(f"blk.{il}.ffn_down_exps.bias")
        if b is not None:
            experts = dup(experts, "ADD_ID", (experts, b, selected))
        if not before:
            experts = binary("MUL", experts, weights)
        return sum_experts(g, experts, k)

    def shexp(self, cur, moe_out, il):
        if f"blk.{il}.ffn_up_shexp.weight" not in self.c.names:
            return moe_out
        sh = self._ffn_named(cur, il, "shexp")
        gi = self.w(f"blk.{il}.ffn_gate_inp_shexp.weight")
        if gi is not None:
            gate = unary("UNARY", mul_mat(gi, cur))
            sh = binary("MUL", sh, gate)
        return binary("ADD", moe_out, sh)

    def dense_lead_moe(self, cur, il, dense=None, probs_b="exp_probs_b.bias"):
        """The DeepSeek-style FFN (``deepseek2.cpp``, ``dots1.cpp``, ``bailingmoe2.cpp``, ``afmoe.cpp``,
        ``step35.cpp``, ``hy-v3.cpp``): a dense SwiGLU FFN on the ``leading_dense_block_count`` first layers (or
        where ``dense`` says: step35/hy-v3 test for the router), else routed experts (the model's gating,
        optional selection bias ``probs_b``, normalised and scaled top-k weights) plus the ungated shared
        experts where the file has them."""
        c = self.c
        if (il < self.p.n_layer_dense_lead) if dense is None else dense:
            return self.ffn(cur, "ffn", il)
        moe_out = self.moe(
            cur,
            il,
            gating=c.gating,
            norm_w=c.expert_weights_norm,
            w_scale=c.expert_weights_scale,
            probs_b=self.w(f"blk.{il}.{probs_b}"),
        )
        if f"blk.{il}.ffn_up_shexp.weight" not in c.names:
            return moe_out
        return binary("ADD", moe_out, self._ffn_named(cur, il, "shexp"))

    def _ffn_named(self, cur, il, sfx):
        up = self.w(f"blk.{il}.ffn_up_{sfx}.weight")
        gate = self.w(f"blk.{il}.ffn_gate_{sfx}.weight")
        down = self.w(f"blk.{il}.ffn_down_{sfx}.weight")
        tmp = mul_mat(up, cur)
        x = mul_mat(gate, cur) if gate is not None else None
        x = glu_split(x, tmp) if x is not None else unary("UNARY", tmp)
        return mul_mat(down, x)

    # output ----------------------------------------------------------------

    def output(self, cur, out_ids=None, norm_first=True, norm="output_norm"):
        """The output norm (``norm``: T5's decoder has ``dec.output_norm``) as t_embd, then the logits."""
        g = self.g
        if not norm_first and out_ids is not None:
            cur = get_rows(cur, out_ids)
        cur = self.norm(cur, f"{norm}.weight", -1, mb=self.w(f"{norm}.bias"))
        cur.flags = cur.fl0 = OUTPUT  # t_embd
        out = self.w("output.weight") or self.w("token_embd.weight@output")
        logits = mul_mat(out, cur)
        if self.c.logit_scale:
            logits = unary("SCALE", logits)
        logits.flags = logits.fl0 = OUTPUT
        g.expand(logits)
        return logits


def _clamped(b, x):
    """build_qkv's ``ggml_clamp`` of each projection where ``hparams.f_clamp_kqv`` > 0."""
    return unary("CLAMP", x) if b.c.clamp_kqv else x


def cache_views(kc, vc, hk, hv, n_head_kv, n_kv, kv_size, ns, v_trans):
    """``llama_kv_cache::get_k`` / ``get_v`` of cache tensors ``kc``, ``vc``: views of ``n_kv`` cells in heads of
    ``hk`` / ``hv``, strided by the tensor's own row width and type (``k->ne[0]``); a transposed V (``v_trans``,
    no flash attention) as ``[n_kv, n_head_kv, hv]``."""
    tk, tv, n_embd_k, n_embd_v = kc.ty, vc.ty, kc.ne[0], vc.ne[0]
    kview = view(
        kc, (hk, n_head_kv, n_kv, ns), (row_size(tk, hk), row_size(tk, n_embd_k), row_size(tk, n_embd_k * kv_size))
    )
    if not v_trans:
        nb = (row_size(tv, hv), row_size(tv, n_embd_v), row_size(tv, n_embd_v * kv_size))
        return kview, view(vc, (hv, n_head_kv, n_kv, ns), nb)
    nb = (row_size(tv, kv_size * hv), row_size(tv, kv_size), row_size(tv, kv_size * n_embd_v))
    return kview, view(vc, (n_kv, n_head_kv, hv, ns), nb)


def qkv(b, il, cur, hd_q, hd_k, hd_v):
    """``build_qkv``: fused or separate projections with optional per-tensor scales and biases, reshaped to
    heads."""
    p, nt = b.p, b.nt
    n_head, n_head_kv = p.n_head[il], p.n_head_kv[il]
    wqkv = b.w(f"blk.{il}.attn_qkv.weight")
    if wqkv is not None:
        qkv = b.mm_s(wqkv, cur)
        qkv = _clamped(b, b.add_b(qkv, f"blk.{il}.attn_qkv.bias"))
        es = 4
        q = view(qkv, (hd_q, n_head, nt), (es * hd_q, qkv.nb[1]))
        k = view(qkv, (hd_k, n_head_kv, nt), (es * hd_k, qkv.nb[1]))
        v = view(qkv, (hd_v, n_head_kv, nt), (es * hd_v, qkv.nb[1]))
        return q, k, v
    q = _clamped(b, b.add_b(b.mm_s(f"blk.{il}.attn_q.weight", cur), f"blk.{il}.attn_q.bias"))
    k = _clamped(b, b.add_b(b.mm_s(f"blk.{il}.attn_k.weight", cur), f"blk.{il}.attn_k.bias"))
    v = _clamped(b, b.add_b(b.mm_s(f"blk.{il}.attn_v.weight", cur), f"blk.{il}.attn_v.bias"))
    return reshape(q, hd_q, n_head, nt), reshape(k, hd_k, n_head_kv, nt), reshape(v, hd_v, n_head_kv, nt)


def gate_heads(attn, gate, hd, n_head, nt):
    """A gate of one value per head over the attention's output (``spark2-5.cpp``, ``laguna.cpp``): [hd * n_head,
    nt] reshaped to heads, multiplied by [1, n_head, nt], reshaped back."""
    return reshape(binary("MUL", reshape(attn, hd, n_head, nt), reshape(gate, 1, n_head, nt)), hd * n_head, nt)


def rope(x, pos, freqs=None):
    return dup(x, "ROPE", (x, pos) if freqs is None else (x, pos, freqs))


def qkv_2d(b, il, cur, hd):
    """``build_qkv(..., reshape=false)``: the 2-D Q, K and V projections (with their biases if any); a fused
    ``attn_qkv`` is split by 2-D views, each made contiguous."""
    p, nt = b.p, b.nt
    n_q, n_k = hd * p.n_head[il], hd * p.n_head_kv[il]
    wqkv = b.w(f"blk.{il}.attn_qkv.weight")
    if wqkv is None:
        q = b.add_b(b.mm(f"blk.{il}.attn_q.weight", cur), f"blk.{il}.attn_q.bias")
        k = b.add_b(b.mm(f"blk.{il}.attn_k.weight", cur), f"blk.{il}.attn_k.bias")
        v = b.add_b(b.mm(f"blk.{il}.attn_v.weight", cur), f"blk.{il}.attn_v.bias")
        return q, k, v
    x = b.add_b(mul_mat(wqkv, cur), f"blk.{il}.attn_qkv.bias")
    q = cont(view(x, (n_q, nt), (x.nb[1],)))
    k = cont(view(x, (n_k, nt), (x.nb[1],)))
    v = cont(view(x, (n_k, nt), (x.nb[1],)))
    return q, k, v


def layer_copy(b, name, il):
    """The copy of the global tensor ``name`` that layer ``il`` reads: created by every layer with
    ``TENSOR_DUPLICATED``, it exists once per buffer type, so each layer's ops find it on the layer's own device
    (bound per placement by ``core._run``); None if the model lacks it."""
    i = b.c.names.get(name)
    if i is None:
        return None
    t = T("w", b.c.shapes[i], (0, 0, 0, 0), NONE, [])
    t.name = name
    b.__dict__.setdefault("drefs", []).append((t, b.pos[il], name))
    return t


def sum_experts(g, experts, k):
    """``build_moe_ffn``'s end: the ``k`` selected experts' outputs ([n_embd, k, n_tokens]) added up through
    views (a ``cont`` when there is one), each op expanded as llama.cpp does."""
    n_embd, nt = experts.ne[0], experts.ne[2]
    g.expand(experts)
    views = []
    for _ in range(k):
        v = view(experts, (n_embd, nt), (experts.nb[2],))
        g.expand(v)
        views.append(v)
    out = views[0]
    for i in range(1, k):
        out = binary("ADD", out, views[i])
        g.expand(out)
    if k == 1:
        out = cont(out)
    return out
