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

from ..lanes import CPU, Lane
from ..memory.backends import backend_of, refused_weights
from ..memory.layout import WeightPlacement, place_weights
from ..memory.settings import LlamaSettings
from ..model import Block, Model, Role

MIXED = "mixed"


@dataclass
class Placement:
    model: Model
    devices: list[Lane]  # lanes other than the CPU, in llama.cpp's order
    layer_device: list[str]  # n_layer + 1 entries (last: output layer); CPU or a device name
    tensor_device: list[str]  # parallel to model.tensors; "" for tensors llama.cpp skips
    settings: LlamaSettings = field(default_factory=LlamaSettings)
    pinned: set[str] = field(default_factory=set)  # block or part ids auto-fit must not move

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_settings(cls, model: Model, devices: list[Lane], settings: LlamaSettings) -> Placement:
        """The placement llama.cpp would make for these settings (what importing a command gives)."""
        wp = place_weights(model, devices, settings)
        mem = settings.copy(n_gpu_layers=-1, tensor_split=None, devices=None, overrides=[])
        return cls(model, list(devices), list(wp.layer_device), list(wp.tensor_device), mem)

    def with_settings(self, settings: LlamaSettings) -> Placement:
        """This placement with the memory settings (context, slots, cache types...) of ``settings``."""
        self.settings = settings.copy(n_gpu_layers=-1, tensor_split=None, devices=None, overrides=[])
        return self

    def copy(self) -> Placement:
        return Placement(
            self.model,
            list(self.devices),
            list(self.layer_device),
            list(self.tensor_device),
            self.settings.copy(),
            set(self.pinned),
        )

    # ------------------------------------------------------------------ queries

    @property
    def lanes(self) -> list[str]:
        return [d.name for d in self.devices] + [CPU]

    def tensor_indices(self, item_id: str) -> tuple[int, ...]:
        """Indices of the tensors of a block (``12:experts``) or expert part (``12:experts:gate``)."""
        try:
            return self.model.index.item_tensors[item_id]
        except KeyError:
            raise KeyError(f"{item_id!r} is not a block or part of this model") from None

    def device_of(self, item_id: str) -> str:
        """The device of a block or part, ``mixed`` when its tensors are split."""
        devs = {self.tensor_device[i] for i in self.tensor_indices(item_id)} - {""}
        if not devs:
            block = self.model.index.block_of_item(item_id)
            return self.layer_device[block.layer] if block.layer is not None else CPU
        return devs.pop() if len(devs) == 1 else MIXED

    def blocks_on(self, device: str) -> list[Block]:
        return [b for b in self.model.blocks if self.device_of(b.id) == device]

    def weight_placement(self) -> WeightPlacement:
        """What the estimator needs: per-tensor devices, layer devices, tied-embedding copy, override flag."""
        n = self.model.params.n_layer
        layers = list(self.layer_device)
        tensors = list(self.tensor_device)
        if self.settings.load_mtp:
            # --spec-type draft-mtp loads the NextN layers' tensors too, on their layer's device (load_mtp)
            idx = self.model.index
            for i, (il, skip) in enumerate(zip(idx.tensor_layer, idx.skipped)):
                if skip and not tensors[i]:
                    tensors[i] = layers[min(il, n)]
        used = [d for d in self.devices if d.name in set(self.layer_device) | set(self.tensor_device)]
        dup = None
        if self.model.params.tied_embeddings:
            te = self.model.index.token_embd
            if te is not None and tensors[te] == CPU and layers[n] != CPU:
                dup = layers[n]
        return WeightPlacement(tensors, layers, dup, used, self.has_overrides())

    def default_tensor_devices(self) -> list[str]:
        """Where each tensor goes with no overrides, given the layer devices: a weight the layer's device refuses
        (a Vulkan driver's size limit) stays in host memory, as place_weights has it (select_weight_buft)."""
        n = self.model.params.n_layer
        if len(self.layer_device) <= n:
            raise ValueError(f"the placement has {len(self.layer_device)} layer devices; the model needs {n + 1}")
        slots = [*self.layer_device[: n + 1], CPU, ""]  # ModelIndex.default_slot's targets
        out = list(map(slots.__getitem__, self.model.index.default_slot))
        for d in self.devices:
            if d.max_tensor_bytes is not None or backend_of(d) == "vulkan":
                for i in refused_weights(self.model, d):
                    if out[i] == d.name:
                        out[i] = CPU
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
        block = self.model.index.block_of_item(item_id)
        if block.layer is not None and block.role is Role.ATTN:
            self.layer_device[block.layer] = device
        elif block.role is Role.OUTPUT:
            self.layer_device[self.model.params.n_layer] = device
        elif block.layer is not None and not any(b.role is Role.ATTN for b in self.model.layer_blocks(block.layer)):
            self.layer_device[block.layer] = device  # layers without attention (pure SSM) follow their weights

    def snapshot(self) -> PlacementState:
        """Everything an undo step restores: layer and tensor devices, the device list, settings and pins."""
        return PlacementState(
            tuple(self.layer_device),
            tuple(self.tensor_device),
            tuple(self.devices),
            self.settings.copy(),
            frozenset(self.pinned),
        )

    def restore(self, state: PlacementState) -> None:
        self.layer_device, self.tensor_device = list(state.layer_device), list(state.tensor_device)
        self.devices = list(state.devices)
        self.settings = state.settings.copy()
        self.pinned = set(state.pinned)


@dataclass(frozen=True)
class PlacementState:
    """A frozen copy of a placement's editable state (what history entries hold)."""

    layer_device: tuple[str, ...]
    tensor_device: tuple[str, ...]
    devices: tuple[Lane, ...]
    settings: LlamaSettings  # a private copy: restore() copies it again
    pinned: frozenset[str]

    def same_assignment(self, other: PlacementState) -> bool:
        """Same layer and tensor devices (settings, device capacities and pins aside)."""
        return self.layer_device == other.layer_device and self.tensor_device == other.tensor_device
