"""Fuzz the Vulkan probe's door: whatever the child process prints (a driver may print anything, a broken
or hostile environment may replace the child), the parent ends in devices or a typed
:class:`~app.devices.vulkan.VulkanProbeError`, never a traceback or a hang.

Inputs: arbitrary text; a valid answer (the shape ``python -m app.devices.vulkan --json`` prints) with
leaves replaced by other JSON values, keys dropped, junk lines around it, deep nesting and huge numbers;
error reports with odd kinds. Each one goes through :func:`~app.devices.vulkan.parse_probe_output` and, when
it parses, through :func:`~app.devices.vulkan.derive` under fuzzed ``GGML_VK_*`` variables. A few go through
the whole :func:`~app.devices.vulkan.probe_vulkan` with a stand-in child that prints them.
"""

from __future__ import annotations

import copy
import json
import sys

from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.devices.vulkan import SCHEMA, VulkanProbe, VulkanProbeError, derive, parse_probe_output, probe_vulkan
from app.errors import LayerdeckError
from tests.fuzz.harness import within_budget


def valid_answer() -> dict:
    heap = {"size": 8 << 30, "flags": 1, "budget": 7 << 30, "usage": 1 << 30}
    device = {
        "index": 0, "name": "Radeon RX 7600", "vendor_id": 0x1002, "device_id": 0x7480, "device_type": 2,
        "api_version": 1 << 22 | 3 << 12, "driver_version": 1, "driver_id": 3, "driver_name": "radv",
        "driver_info": "Mesa", "device_uuid": "ab" * 16, "device_luid": "00" * 8, "device_luid_valid": False,
        "max_storage_buffer_range": (1 << 32) - 1, "min_storage_buffer_offset_alignment": 4,
        "max_memory_allocation_size": 4 << 30, "max_buffer_size": 1 << 40, "storage_buffer_16bit_access": True,
        "extensions": ["VK_KHR_maintenance4", "VK_EXT_memory_budget"], "heaps": [heap, {**heap, "flags": 0}],
    }
    cpu = {**copy.deepcopy(device), "index": 1, "device_type": 4, "device_uuid": "cd" * 16}
    return {"schema": SCHEMA, "loader": "libvulkan.so.1", "instance_version": 1 << 22 | 3 << 12,
            "devices": [device, cpu], "notes": []}


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True), st.text(max_size=40), st.just("x" * 5000),
)
json_value = st.recursive(json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c,
                                                                                          max_size=4), max_leaves=12)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated_answer(draw) -> str:
    doc = valid_answer()
    for _ in range(draw(st.integers(0, 4))):
        paths = [p for p in _paths(doc) if p]
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "drop", "keep"]))
        if action == "replace":
            parent[path[-1]] = draw(json_value)
        elif action == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        if not isinstance(doc, dict) or not isinstance(doc.get("devices"), list):
            break
    text = json.dumps(doc)
    before = draw(st.sampled_from(["", "WARNING: lavapipe is not a conformant vulkan implementation\n", "{\n"]))
    after = draw(st.sampled_from(["", "\n", "\n{trailing", "\n[1]"]))
    return before + text + after


hostile = st.one_of(
    st.text(max_size=300),
    mutated_answer(),
    st.just("[" * 100000 + "]" * 100000),
    st.builds(lambda k, m: json.dumps({"schema": SCHEMA, "notes": [], "error": {"kind": k, "message": m}}),
              json_value, json_value),
)

envs = st.dictionaries(
    st.sampled_from(["GGML_VK_VISIBLE_DEVICES", "GGML_VK_FORCE_MAX_ALLOCATION_SIZE",
                     "GGML_VK_FORCE_MAX_BUFFER_SIZE", "GGML_VK_SUBALLOCATION_BLOCK_SIZE"]),
    st.one_of(st.text(max_size=20), st.integers(-5, 1 << 70).map(str), st.just("0,1,1,0")),
    max_size=4,
)


@given(text=hostile, env=envs)
@example(text=json.dumps(valid_answer()), env={"GGML_VK_VISIBLE_DEVICES": "1,0"})
@example(text=json.dumps(valid_answer()), env={"GGML_VK_FORCE_MAX_BUFFER_SIZE": "-1"})
@example(text="", env={})
def test_child_output_ends_in_devices_or_a_typed_error(text, env):
    with within_budget("parse_probe_output"):
        try:
            raw, meta = parse_probe_output(text)
        except VulkanProbeError as exc:
            assert isinstance(exc, LayerdeckError) and str(exc)
            return
        devices, notes = derive(raw, env)
    assert len(devices) >= len(raw)
    assert all(isinstance(n, str) for n in notes)
    named = sorted(d.llama_index for d in devices if d.llama_index is not None)
    assert named == list(range(len(named)))  # Vulkan0..N-1, no gaps
    for d in devices:
        assert 0 <= d.suballocation_block_size <= d.max_memory_allocation_size
        assert d.max_weight_bytes <= d.max_buffer_size


@settings(max_examples=6)
@given(text=hostile)
@example(text=json.dumps(valid_answer()))
def test_probe_vulkan_turns_any_child_output_into_an_answer(text, tmp_path_factory):
    """The whole door: a stand-in child prints ``text``; probe_vulkan answers with devices or a problem."""
    script = tmp_path_factory.mktemp("child") / "child.py"
    script.write_text(f"import sys\nsys.stdout.write({text!r})\n")
    probe = probe_vulkan(timeout=10, env={}, python=[sys.executable, str(script)])
    assert isinstance(probe, VulkanProbe)
    if probe.problem is not None:
        assert isinstance(probe.problem, VulkanProbeError) and probe.notes
    else:
        assert probe.devices
