"""A placement: which device holds each tensor, and which device each layer (its KV cache) belongs to.

This is the object the board edits and the exporter turns into llama.cpp
arguments. It can represent anything llama.cpp can express: a layer device
per layer (``-ngl``/``-ts``/``-dev``) plus a device per tensor (``-ot``).
Blocks and expert parts are views over tensors. The layer device of a layer
follows its attention block, because llama.cpp keeps a layer's KV cache on
the layer's device and no override moves it.

Device names are llama.cpp's (``CUDA0``, ``RPC1``) and ``CPU`` for host memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..memory.layout import WeightPlacement, place_weights
from ..lanes import CPU, Lane
from ..memory.settings import LlamaSettings
from ..model import Block, Model, Role

MIXED = "mixed"


@dataclass
class Placement:
    model: Model
    devices: list[Lane]                 # lanes other than the CPU, in llama.cpp's order
    layer_device: list[str]                  # n_layer + 1 entries (last: output layer); CPU or a device name
    tensor_device: list[str]                 # parallel to model.tensors; "" for tensors llama.cpp skips
    settings: LlamaSettings = field(default_factory=LlamaSettings)
    pinned: set[str] = field(default_factory=set)   # block or part ids auto-fit must not move

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_settings(cls, model: Model, devices: list[Lane], settings: LlamaSettings) -> "Placement":
        """The placement llama.cpp would make for these settings (what importing a command gives)."""
        wp = place_weights(model, devices, settings)
        mem = settings.copy(n_gpu_layers=-1, tensor_split=None, devices=None, overrides=[])
        return cls(model, list(devices), list(wp.layer_device), list(wp.tensor_device), mem)

    @classmethod
    def all_on(cls, model: Model, devices: list[Lane], device: str, settings: LlamaSettings | None = None
               ) -> "Placement":
        """Everything on one device (token embeddings stay on the CPU, as llama.cpp keeps them)."""
        s = settings or LlamaSettings()
        if device == CPU:
            base = s.copy(n_gpu_layers=0)
            return cls.from_settings(model, devices, base)
        return cls.from_settings(model, devices, s.copy(n_gpu_layers=-2, devices=[device]))

    def with_settings(self, settings: LlamaSettings) -> "Placement":
        """This placement with the memory settings (context, slots, cache types...) of ``settings``."""
        self.settings = settings.copy(n_gpu_layers=-1, tensor_split=None, devices=None, overrides=[])
        return self

    def copy(self) -> "Placement":
        return Placement(self.model, list(self.devices), list(self.layer_device), list(self.tensor_device),
                         self.settings.copy(), set(self.pinned))

    # ------------------------------------------------------------------ queries

    @property
    def lanes(self) -> list[str]:
        return [d.name for d in self.devices] + [CPU]

    def tensor_indices(self, item_id: str) -> list[int]:
        """Indices of the tensors of a block (``12:experts``) or expert part (``12:experts:gate``); cached per model."""
        cache = self.model.__dict__.setdefault("_item_tensors", {})
        hit = cache.get(item_id)
        if hit is not None:
            return hit
        idx = self.model.__dict__.get("_tensor_pos")
        if idx is None:
            idx = self.model.__dict__["_tensor_pos"] = {t.name: i for i, t in enumerate(self.model.tensors)}
        block_id, _, part = item_id.partition(":experts:") if ":experts:" in item_id else (item_id, "", "")
        if part:
            block = self.model.block(block_id + ":experts")
            hit = [idx[t.name] for t in block.parts.get(part, [])]
        else:
            hit = [idx[t.name] for t in self.model.block(item_id).tensors]
        cache[item_id] = hit
        return hit

    def device_of(self, item_id: str) -> str:
        """The device of a block or part, ``mixed`` when its tensors are split."""
        devs = {self.tensor_device[i] for i in self.tensor_indices(item_id)} - {""}
        if not devs:
            block = self.model.block(item_id.split(":experts:")[0] if ":experts:" in item_id else item_id)
            return self.layer_device[block.layer] if block.layer is not None else CPU
        return devs.pop() if len(devs) == 1 else MIXED

    def blocks_on(self, device: str) -> list[Block]:
        return [b for b in self.model.blocks if self.device_of(b.id) == device]

    def weight_placement(self) -> WeightPlacement:
        """What the estimator needs: per-tensor devices, layer devices, tied-embedding copy, override flag."""
        n = self.model.params.n_layer
        layers = list(self.layer_device)
        tensors = list(self.tensor_device)
        used = [d for d in self.devices if d.name in set(self.layer_device) | set(self.tensor_device)]
        dup = None
        if self.model.params.tied_embeddings:
            te = next(i for i, t in enumerate(self.model.tensors) if t.name == "token_embd.weight")
            if tensors[te] == CPU and layers[n] != CPU:
                dup = layers[n]
        return WeightPlacement(tensors, layers, dup, used, self.has_overrides())

    def default_tensor_devices(self) -> list[str]:
        """Where each tensor goes with no overrides, given the layer devices."""
        n = self.model.params.n_layer
        from ..memory.layout import _skipped, _tensor_layers

        out = []
        for il, skip in zip(_tensor_layers(self.model), _skipped(self.model)):
            out.append("" if skip else CPU if il < 0 else self.layer_device[min(il, n)])
        return out

    def has_overrides(self) -> bool:
        return self.tensor_device != self.default_tensor_devices()

    # ------------------------------------------------------------------ edits (used by commands)

    def assign(self, item_id: str, device: str) -> None:
        """Put a block or expert part on ``device``. An attention block also moves its layer (and KV)."""
        if device not in self.lanes:
            raise ValueError(f"{device} is not one of the devices ({', '.join(self.lanes)}).")
        for i in self.tensor_indices(item_id):
            if self.tensor_device[i] != "":
                self.tensor_device[i] = device
        block = self.model.block(item_id.split(":experts:")[0] + ":experts" if ":experts:" in item_id else item_id)
        if block.layer is not None and block.role is Role.ATTN:
            self.layer_device[block.layer] = device
        elif block.role is Role.OUTPUT:
            self.layer_device[self.model.params.n_layer] = device
        elif block.layer is not None and not any(b.role is Role.ATTN for b in self.model.layer_blocks(block.layer)):
            self.layer_device[block.layer] = device  # layers without attention (pure SSM) follow their weights

    def snapshot(self) -> tuple:
        """Everything an undo step restores: layer devices, tensor devices and the device list."""
        return tuple(self.layer_device), tuple(self.tensor_device), tuple(self.devices)

    def restore(self, snap: tuple) -> None:
        self.layer_device, self.tensor_device = list(snap[0]), list(snap[1])
        if len(snap) > 2:
            self.devices = list(snap[2])
