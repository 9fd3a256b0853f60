"""The Vulkan probe (app/devices/vulkan.py) against the real header, a C compiler, the real loader, Mesa's
lavapipe driver and ``vulkaninfo``; the llama.cpp Vulkan build, when one is already built, for the names.

What needs a part that is missing here is skipped with the reason: the Vulkan 1.4 header
(scripts/vulkan-headers.sh), a C compiler, the lavapipe driver (apt-get install mesa-vulkan-drivers),
``vulkaninfo`` (apt-get install vulkan-tools).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from app.devices import vulkan as vk
from app.devices.vulkan import RawVulkanDevice, VulkanHeap, VulkanProbeError, derive, probe_vulkan

ROOT = Path(__file__).resolve().parents[2]


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_vulkan_structs", ROOT / "scripts" / "gen_vulkan_structs.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load_generator()
HEADER = gen.default_header()
needs_header = pytest.mark.skipif(
    HEADER is None, reason="vulkan_core.h is not installed (run scripts/vulkan-headers.sh or install libvulkan-dev)"
)
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc/gcc/clang) to check the C layout with")

LVP_ICDS = sorted(
    p for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d") for p in glob.glob(f"{d}/lvp_icd*.json")
)
VULKANINFO = shutil.which("vulkaninfo")


def _loader_present() -> bool:
    try:
        ctypes.CDLL("vulkan-1.dll" if sys.platform == "win32" else "libvulkan.so.1")
        return True
    except OSError:
        return False


needs_lavapipe = pytest.mark.skipif(
    not LVP_ICDS or not _loader_present(),
    reason="no Vulkan loader or no lavapipe driver (Debian: apt-get install libvulkan1 mesa-vulkan-drivers)",
)

#: only lavapipe, whatever else is installed: the loader reads both names (old and new)
def lavapipe_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GGML_VK_")}
    env["VK_ICD_FILENAMES"] = env["VK_DRIVER_FILES"] = LVP_ICDS[0] if LVP_ICDS else ""
    env.update(extra)
    return env


# =========================================================================== generated structures


@pytest.fixture(scope="module")
def header():
    return gen.parse_header(HEADER.read_text(encoding="utf-8"))


@needs_header
def test_generated_block_is_what_the_header_gives(header):
    """The block in the module is exactly what the generator emits from the header (bar the version line)."""
    emitted = gen.emit(header).splitlines()[1:]
    current = gen.current_block((ROOT / "app/devices/vulkan.py").read_text(encoding="utf-8")).splitlines()[1:]
    assert current == emitted


@needs_header
def test_fields_are_the_header_declarations(header):
    """Each emitted struct has the header's members, in order, with the ctypes type of the C type."""
    names = gen.struct_order(header)
    for root in gen.STRUCTS:
        assert root in names
    assert {"VkPhysicalDeviceLimits", "VkPhysicalDeviceSparseProperties", "VkMemoryHeap", "VkMemoryType",
            "VkPhysicalDeviceFeatures"} <= set(names)
    scalars = {"uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32, "uint64_t": ctypes.c_uint64,
               "float": ctypes.c_float, "size_t": ctypes.c_size_t, "char": ctypes.c_char, "uint8_t": ctypes.c_uint8}
    for name in names:
        cls = getattr(vk, name)
        members = header.structs[name]
        assert [f[0] for f in cls._fields_] == [m.name for m in members], name
        for (fname, ftype), m in zip(cls._fields_, members):
            t = ftype
            for dim in m.dims:  # arrays: the length is the header's constant
                assert issubclass(t, ctypes.Array), (name, fname)
                assert t._length_ == (int(dim) if dim.isdigit() else header.defines[dim]), (name, fname)
                t = t._type_
            if m.is_pointer or m.base in header.handles:
                assert t is ctypes.c_void_p, (name, fname)
            elif m.base in header.structs:
                assert t is getattr(vk, m.base), (name, fname)
            elif m.base in header.enums:
                assert t is ctypes.c_int, (name, fname)
            else:
                assert t is scalars[gen.resolve_scalar(header, m.base)], (name, fname)
    # the facts the probe reads are where the header puts them
    limits = [m.name for m in header.structs["VkPhysicalDeviceLimits"]]
    assert "maxStorageBufferRange" in limits and "minStorageBufferOffsetAlignment" in limits
    assert [m.name for m in header.structs["VkPhysicalDeviceMaintenance4Properties"]][-1] == "maxBufferSize"


@needs_header
@needs_cc
def test_layout_matches_the_c_compiler(header, tmp_path):
    """sizeof and every offsetof, as the C compiler lays the header's structs out, equal ctypes'."""
    names = gen.struct_order(header)
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <vulkan/vulkan_core.h>", "int main(void) {"]
    for name in names:
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        for m in header.structs[name]:
            lines.append(f'printf("{name}.{m.name} %zu\\n", offsetof({name}, {m.name}));')
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    include = HEADER.parent.parent
    subprocess.run([CC, f"-I{include}", str(src), "-o", str(exe)], check=True, capture_output=True, timeout=120)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=30).stdout
    c = dict(line.rsplit(" ", 1) for line in out.splitlines())
    checked = 0
    for name in names:
        cls = getattr(vk, name)
        assert ctypes.sizeof(cls) == int(c[name]), name
        for m in header.structs[name]:
            assert getattr(cls, m.name).offset == int(c[f"{name}.{m.name}"]), f"{name}.{m.name}"
            checked += 1
    assert checked > 150  # VkPhysicalDeviceLimits alone has 106 members


# =========================================================================== lavapipe vs vulkaninfo


def parse_vulkaninfo(text: str) -> list[dict]:
    """The facts ``vulkaninfo`` (text output) prints per GPU: properties, limits, maintenance 3/4, driver,
    extensions, heaps."""

    def num(v: str) -> int:
        return int(v.split()[0], 0)

    gpus: list[dict] = []
    body = text.split("Device Properties and Extensions:", 1)[1]
    for chunk in re.split(r"^GPU(\d+):$", body, flags=re.M)[1:][1::2]:
        g: dict = {"extensions": [], "heaps": []}

        def field(key: str, section: str | None = None, chunk: str = chunk) -> str:
            part = chunk
            if section:
                part = chunk.split(section + ":", 1)[1]
            m = re.search(rf"^\s*{key}\s*=\s*(.+)$", part, flags=re.M)
            assert m, key
            return m.group(1).strip()

        g["deviceType"] = field("deviceType")
        g["deviceName"] = field("deviceName")
        g["vendorID"] = num(field("vendorID"))
        g["deviceID"] = num(field("deviceID"))
        g["maxStorageBufferRange"] = num(field("maxStorageBufferRange"))
        g["minStorageBufferOffsetAlignment"] = num(field("minStorageBufferOffsetAlignment"))
        g["maxMemoryAllocationSize"] = num(field("maxMemoryAllocationSize", "VkPhysicalDeviceMaintenance3Properties"))
        g["maxBufferSize"] = num(field("maxBufferSize", "VkPhysicalDeviceMaintenance4Properties"))
        g["driverName"] = field("driverName", "VkPhysicalDeviceDriverProperties")
        g["storageBuffer16BitAccess"] = field("storageBuffer16BitAccess") == "true"
        ext = re.search(r"^Device Extensions: count = (\d+)\n(.*?)\n\n", chunk, flags=re.M | re.S)
        assert ext
        g["extensions"] = [ln.split(":")[0].strip() for ln in ext.group(2).splitlines() if ln.strip()]
        assert len(g["extensions"]) == int(ext.group(1))
        heaps = chunk.split("memoryHeaps: count", 1)[1].split("memoryTypes:", 1)[0]
        for h in re.split(r"memoryHeaps\[\d+\]:", heaps)[1:]:
            size = int(re.search(r"size\s*=\s*(\d+)", h).group(1))
            g["heaps"].append((size, "MEMORY_HEAP_DEVICE_LOCAL_BIT" in h))
        gpus.append(g)
    return gpus


_TYPES = {"PHYSICAL_DEVICE_TYPE_CPU": "cpu", "PHYSICAL_DEVICE_TYPE_DISCRETE_GPU": "discrete",
          "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU": "integrated", "PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU": "virtual",
          "PHYSICAL_DEVICE_TYPE_OTHER": "other"}


@pytest.fixture(scope="module")
def lavapipe_probe():
    return probe_vulkan(env=lavapipe_env(GGML_VK_VISIBLE_DEVICES="0"))


@needs_lavapipe
@pytest.mark.skipif(VULKANINFO is None, reason="vulkaninfo is not installed (apt-get install vulkan-tools)")
def test_lavapipe_facts_equal_vulkaninfo(lavapipe_probe):
    info = subprocess.run([VULKANINFO], env=lavapipe_env(), capture_output=True, text=True, timeout=60)
    assert info.returncode == 0, info.stderr[-500:]
    expected = parse_vulkaninfo(info.stdout)
    probe = lavapipe_probe
    assert probe.problem is None, probe.notes
    assert len(probe.devices) == len(expected) == 1
    d, e = probe.devices[0].raw, expected[0]
    assert d.type_name == _TYPES[e["deviceType"]] == "cpu"
    assert d.name == e["deviceName"] and d.name.startswith("llvmpipe")
    assert (d.vendor_id, d.device_id) == (e["vendorID"], e["deviceID"])
    assert d.driver_name == e["driverName"] == "llvmpipe"
    assert d.driver_id_name == "MESA_LLVMPIPE"
    assert d.max_storage_buffer_range == e["maxStorageBufferRange"] == 134217728
    assert d.min_storage_buffer_offset_alignment == e["minStorageBufferOffsetAlignment"]
    assert d.max_memory_allocation_size == e["maxMemoryAllocationSize"]
    assert d.max_buffer_size == e["maxBufferSize"]
    assert d.storage_buffer_16bit_access == e["storageBuffer16BitAccess"]
    assert sorted(d.extensions) == sorted(e["extensions"])  # vulkaninfo prints them sorted
    assert [(h.size, h.device_local) for h in d.heaps] == e["heaps"]
    assert probe.instance_version is not None and probe.instance_version >= (1 << 22 | 2 << 12)


@needs_lavapipe
def test_lavapipe_derived_as_ggml_vulkan(lavapipe_probe):
    """ggml_vk_get_device's formulas on lavapipe's real numbers (VK_KHR_maintenance4 is listed)."""
    dev = lavapipe_probe.devices[0]
    raw = dev.raw
    assert "VK_KHR_maintenance4" in raw.extensions and dev.maintenance4
    assert raw.max_buffer_size is not None
    assert dev.max_memory_allocation_size == min(raw.max_memory_allocation_size, raw.max_buffer_size)
    assert dev.max_buffer_size == raw.max_buffer_size
    assert dev.suballocation_block_size == min(1 << 30, dev.max_memory_allocation_size)
    assert dev.alignment == raw.min_storage_buffer_offset_alignment
    assert not dev.shader_64b_indexing  # lavapipe 22.3 does not offer VK_EXT_shader_64bit_indexing
    assert dev.max_weight_bytes == min(dev.max_buffer_size, raw.max_storage_buffer_range) == 134217728
    assert not dev.uma  # a CPU-type device is not "integrated"
    assert dev.memory_total == sum(h.size for h in raw.heaps if h.device_local)
    # subgroups of 8 lanes (LLVM's 256-bit vectors): no DSV4_HC_COMB pipeline, so llama.cpp runs it on the CPU
    assert raw.subgroup_size == 8 and raw.subgroup_ops & vk.VK_SUBGROUP_FEATURE_SHUFFLE_BIT
    assert raw.refused_ops == {"DSV4_HC_COMB"}


@needs_lavapipe
def test_refused_ops_follow_the_pipelines_ggml_vulkan_creates(lavapipe_probe):
    """ggml_vk_load_shaders creates dsv4_hc_comb_f32 only with basic + shuffle subgroup operations in compute
    shaders, computeFullSubgroups and 16+ lanes (ggml-vulkan.cpp 3589-3594); supports_op then refuses the op."""
    raw = lavapipe_probe.devices[0].raw
    gpu = replace(raw, subgroup_size=32, subgroup_stages=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                  subgroup_ops=vk.VK_SUBGROUP_FEATURE_BASIC_BIT | vk.VK_SUBGROUP_FEATURE_SHUFFLE_BIT,
                  full_subgroups=True)
    assert gpu.refused_ops == frozenset()
    assert replace(gpu, full_subgroups=False).refused_ops == {"DSV4_HC_COMB"}
    assert replace(gpu, subgroup_size=8).refused_ops == {"DSV4_HC_COMB"}
    assert replace(gpu, subgroup_ops=vk.VK_SUBGROUP_FEATURE_BASIC_BIT).refused_ops == {"DSV4_HC_COMB"}
    assert replace(gpu, subgroup_stages=0).refused_ops == {"DSV4_HC_COMB"}
    assert replace(gpu, subgroup_size=None).refused_ops == frozenset()  # an older child: not known, not refused


@needs_lavapipe
def test_env_overrides_are_honoured(lavapipe_probe):
    raw = [d.raw for d in lavapipe_probe.devices]
    base = lavapipe_probe.devices[0]
    devs, notes = derive(raw, {"GGML_VK_VISIBLE_DEVICES": "0", "GGML_VK_FORCE_MAX_ALLOCATION_SIZE": "536870912"})
    assert devs[0].max_memory_allocation_size == 536870912
    assert devs[0].max_buffer_size == base.max_buffer_size  # maintenance4: still maxBufferSize
    assert devs[0].suballocation_block_size == 536870912  # capped by the forced max allocation
    assert any("GGML_VK_FORCE_MAX_ALLOCATION_SIZE" in n for n in notes)
    devs, _ = derive(raw, {"GGML_VK_FORCE_MAX_BUFFER_SIZE": "100000000", "GGML_VK_SUBALLOCATION_BLOCK_SIZE": "268435456"})
    assert devs[0].max_buffer_size == 100000000
    assert devs[0].max_weight_bytes == 100000000  # below maxStorageBufferRange now
    assert devs[0].suballocation_block_size == 268435456
    devs, notes = derive(raw, {"GGML_VK_SUBALLOCATION_BLOCK_SIZE": "lots"})
    assert devs[0].suballocation_block_size == base.suballocation_block_size
    assert any("'lots' is not a number" in n for n in notes)
    devs, _ = derive(raw, {"GGML_VK_FORCE_MAX_ALLOCATION_SIZE": "  123abc"})  # std::stoull reads the prefix
    assert devs[0].max_memory_allocation_size == 123


@needs_lavapipe
def test_lavapipe_is_vulkan0_only_when_listed(lavapipe_probe):
    assert lavapipe_probe.devices[0].llama_name == "Vulkan0"
    assert [d.llama_name for d in lavapipe_probe.llama_devices] == ["Vulkan0"]
    hidden = probe_vulkan(env=lavapipe_env())
    assert hidden.problem is None
    assert len(hidden.devices) == 1 and hidden.devices[0].llama_name is None
    assert hidden.llama_devices == ()
    assert "cpu-type Vulkan device" in hidden.devices[0].notes[0]
    assert "GGML_VK_VISIBLE_DEVICES=0" in hidden.devices[0].notes[0]
    assert any("only CPU-type Vulkan devices" in n for n in hidden.notes)
    bad = probe_vulkan(env=lavapipe_env(GGML_VK_VISIBLE_DEVICES="1"))
    assert bad.llama_devices == ()
    assert any("Invalid device index" in n for n in bad.notes)


def _vulkan_llama_server() -> Path | None:
    """An already built Vulkan llama-server (never builds one here)."""
    env_dir = os.environ.get("LAYERDECK_LLAMA_CPP_VULKAN_DIR")
    pats = [f"{env_dir}/llama-server"] if env_dir else []
    pats.append(str(Path.home() / ".cache/layerdeck/llama.cpp-*-vulkan-*/bin/llama-server"))
    for pat in pats:
        for p in sorted(glob.glob(pat)):
            if os.access(p, os.X_OK):
                return Path(p)
    return None


@needs_lavapipe
@pytest.mark.skipif(_vulkan_llama_server() is None, reason="no Vulkan build of llama-server is built yet")
def test_names_and_memory_match_llama_server_list_devices(lavapipe_probe):
    server = _vulkan_llama_server()
    listed = subprocess.run([str(server), "--list-devices"], env=lavapipe_env(GGML_VK_VISIBLE_DEVICES="0"),
                            capture_output=True, text=True, timeout=120)
    m = re.search(r"^\s*Vulkan0: (.+) \((\d+) MiB, (\d+) MiB free\)", listed.stdout + listed.stderr, flags=re.M)
    assert m, listed.stdout + listed.stderr
    dev = lavapipe_probe.by_llama_name("Vulkan0")
    assert dev is not None and dev.name == m.group(1)
    assert dev.memory_total // (1 << 20) == int(m.group(2))
    assert dev.memory_free // (1 << 20) == int(m.group(3))
    unlisted = subprocess.run([str(server), "--list-devices"], env=lavapipe_env(), capture_output=True, text=True,
                              timeout=120)
    assert "Vulkan0" not in unlisted.stdout + unlisted.stderr


# =========================================================================== enumeration rules


def dev(index: int, type_name: str, uuid: str, driver: str = "MESA_RADV", vendor: int = vk.VK_VENDOR_ID_AMD,
        fp16: bool = True, luid: str | None = None) -> RawVulkanDevice:
    types = {"discrete": 2, "integrated": 1, "virtual": 3, "cpu": 4, "other": 0}
    return RawVulkanDevice(
        index=index, name=f"dev{index}", vendor_id=vendor, device_id=0x1234, device_type=types[type_name],
        api_version=1 << 22 | 3 << 12, driver_version=1, driver_id=vk.VkDriverId[f"VK_DRIVER_ID_{driver}"],
        driver_name=driver.lower(), driver_info="", device_uuid=uuid * 32, device_luid=(luid or "0") * 16,
        device_luid_valid=luid is not None, max_storage_buffer_range=(1 << 32) - 1,
        min_storage_buffer_offset_alignment=64, max_memory_allocation_size=4 << 30, max_buffer_size=None,
        storage_buffer_16bit_access=fp16, extensions=("VK_EXT_memory_budget",),
        heaps=(VulkanHeap(16 << 30, 1, budget=15 << 30, usage=1 << 30), VulkanHeap(64 << 30, 0)),
    )


def test_default_order_skips_cpu_and_unsupported_and_dedups():
    raw = [
        dev(0, "cpu", "a"),
        dev(1, "discrete", "b", driver="AMD_PROPRIETARY"),
        dev(2, "integrated", "c", vendor=vk.VK_VENDOR_ID_INTEL, driver="INTEL_OPEN_SOURCE_MESA"),
        dev(3, "discrete", "b", driver="MESA_RADV"),  # the same GPU as 1, with RADV, which llama.cpp prefers
        dev(4, "discrete", "d", fp16=False),
        dev(5, "virtual", "e"),
    ]
    devices, _ = derive(raw, {})
    got = {d.raw.index: d.llama_name for d in devices}
    # RADV replaces the AMD proprietary entry and moves to the end (ggml_vk_instance_init line 5374)
    assert got == {0: None, 1: None, 2: "Vulkan0", 3: "Vulkan1", 4: None, 5: None}
    by = {d.raw.index: d for d in devices}
    assert "same GPU as device 3" in by[1].notes[0]
    assert "storageBuffer16BitAccess" in by[4].notes[0]
    assert "virtual-type" in by[5].notes[0]
    # integrated = uma: every heap counts; discrete: device-local only, free from the memory budget
    assert by[2].uma and by[2].memory_total == 80 << 30
    assert by[3].memory_total == 16 << 30 and by[3].memory_free == 14 << 30


def test_dedup_keeps_the_first_when_not_preferred_and_spares_moltenvk():
    raw = [dev(0, "discrete", "b", driver="MESA_RADV"), dev(1, "discrete", "b", driver="AMD_PROPRIETARY")]
    got = [d.llama_name for d in derive(raw, {})[0]]
    assert got == ["Vulkan0", None]
    molten = [dev(0, "discrete", "b", driver="MOLTENVK", vendor=vk.VK_VENDOR_ID_APPLE),
              dev(1, "discrete", "b", driver="MOLTENVK", vendor=vk.VK_VENDOR_ID_APPLE)]
    assert [d.llama_name for d in derive(molten, {})[0]] == ["Vulkan0", "Vulkan1"]
    luid = [dev(0, "discrete", "1", driver="NVIDIA_PROPRIETARY", vendor=vk.VK_VENDOR_ID_NVIDIA, luid="7"),
            dev(1, "discrete", "2", driver="MESA_DOZEN", vendor=vk.VK_VENDOR_ID_NVIDIA, luid="7")]
    assert [d.llama_name for d in derive(luid, {})[0]] == ["Vulkan0", None]


def test_fallback_to_first_non_cpu_device():
    raw = [dev(0, "cpu", "a"), dev(1, "virtual", "b", fp16=False), dev(2, "other", "c")]
    devices, notes = derive(raw, {})
    assert [d.llama_name for d in devices] == [None, "Vulkan0", None]
    assert any("falls back to dev1" in n for n in notes)


def test_visible_devices_order_repeats_and_errors():
    raw = [dev(0, "cpu", "a"), dev(1, "discrete", "b", fp16=False), dev(2, "discrete", "c")]
    devices, notes = derive(raw, {"GGML_VK_VISIBLE_DEVICES": "2,0"})
    assert {d.raw.index: d.llama_name for d in devices} == {0: "Vulkan1", 1: None, 2: "Vulkan0"}
    devices, notes = derive(raw, {"GGML_VK_VISIBLE_DEVICES": "1 1"})
    assert sorted(d.llama_name for d in devices if d.llama_name) == ["Vulkan0", "Vulkan1"]
    assert any("more than once" in n for n in notes) and any("16-bit storage" in n for n in notes)
    for value in ("3", "0,-1", "0,99999999999999999999"):
        devices, notes = derive(raw, {"GGML_VK_VISIBLE_DEVICES": value})
        if value.endswith("9"):  # overflow sets failbit: the list just ends
            assert [d.llama_name for d in devices] == ["Vulkan0", None, None]
        else:
            assert all(d.llama_name is None for d in devices), value
            assert any("Invalid device index" in n for n in notes)
    # reading stops at the first entry that is not a number; "" lists nothing
    assert vk.visible_device_indices("1,x,0", 3) == ([1], None)
    assert vk.visible_device_indices("", 3) == ([], None)
    assert vk.visible_device_indices(" +2 ,0", 3) == ([2, 0], None)


def test_64bit_indexing_lifts_the_storage_buffer_limit_only_when_built_for_it():
    raw = [replace(dev(0, "discrete", "a"), extensions=("VK_EXT_shader_64bit_indexing", "VK_KHR_maintenance4"),
                   max_buffer_size=8 << 30, max_storage_buffer_range=(1 << 32) - 1)]
    d, = derive(raw, {}, built_with_64bit_indexing=True)[0]
    assert d.shader_64b_indexing and d.max_weight_bytes == 8 << 30
    assert d.max_memory_allocation_size == 4 << 30  # min(maxMemoryAllocationSize, maxBufferSize)
    d, = derive(raw, {}, built_with_64bit_indexing=False)[0]
    assert not d.shader_64b_indexing and d.max_weight_bytes == (1 << 32) - 1
    assert any("VK_EXT_shader_64bit_indexing" in n for n in d.notes)


def test_without_maintenance4_the_buffer_limit_is_the_allocation_limit():
    raw = [replace(dev(0, "discrete", "a"), max_buffer_size=8 << 30)]  # Vulkan 1.3 value, no extension listed
    d, = derive(raw, {})[0]
    assert not d.maintenance4
    assert d.max_buffer_size == d.max_memory_allocation_size == 4 << 30
    assert any("ignores it" in n for n in d.notes)


# =========================================================================== failures


def test_missing_loader_is_a_note(tmp_path):
    t0 = time.monotonic()
    probe = probe_vulkan(env=dict(os.environ), loader=tmp_path / "libvulkan.so.1")
    assert probe.devices == ()
    assert isinstance(probe.problem, VulkanProbeError) and probe.problem.kind == "no_loader"
    assert str(tmp_path / "libvulkan.so.1") in probe.notes[0] and "install the Vulkan loader" in probe.notes[0]
    assert time.monotonic() - t0 < 20


@needs_lavapipe
def test_no_driver_is_a_note(tmp_path):
    missing = str(tmp_path / "no_icd.json")
    probe = probe_vulkan(env={**lavapipe_env(), "VK_ICD_FILENAMES": missing, "VK_DRIVER_FILES": missing})
    assert probe.devices == ()
    assert probe.problem is not None and probe.problem.kind == "no_devices"
    assert "found no Vulkan driver" in probe.notes[0] and "mesa-vulkan-drivers" in probe.notes[0]


def test_an_old_loader_means_no_llama_devices():
    devices, _ = derive([dev(0, "discrete", "a")], {}, instance_version=1 << 22 | 1 << 12)
    assert devices[0].llama_name is None and "older than 1.2" in devices[0].notes[0]
    devices, notes = derive([], {"GGML_VK_VISIBLE_DEVICES": "0"})
    assert devices == [] and "reports no device" in notes[0]


def test_a_library_that_is_not_a_loader_is_a_note():
    libc = "libc.so.6" if sys.platform.startswith("linux") else None
    if libc is None:
        pytest.skip("needs glibc's libc.so.6 as a library without vkGetInstanceProcAddr")
    probe = probe_vulkan(loader=libc)
    assert probe.problem is not None and probe.problem.kind == "loader_error"
    assert "not a Vulkan loader" in probe.notes[0]


def _fake_loader(tmp_path: Path, body: str) -> Path:
    src = tmp_path / "fake.c"
    src.write_text("#include <signal.h>\n#include <unistd.h>\n"
                   f"void *vkGetInstanceProcAddr(void *instance, const char *name) {{ {body} return 0; }}\n")
    lib = tmp_path / "libfakevulkan.so"
    subprocess.run([CC, "-shared", "-fPIC", str(src), "-o", str(lib)], check=True, capture_output=True, timeout=60)
    return lib


@needs_cc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds a Linux shared library")
def test_a_crashing_driver_is_a_note(tmp_path):
    lib = _fake_loader(tmp_path, "raise(SIGSEGV);")
    probe = probe_vulkan(loader=lib, timeout=20)
    assert probe.problem is not None and probe.problem.kind == "crashed"
    assert "crashed" in probe.notes[0] and "SIGSEGV" in probe.notes[0]


@needs_cc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds a Linux shared library")
def test_a_hanging_driver_is_stopped(tmp_path):
    lib = _fake_loader(tmp_path, "sleep(600);")
    t0 = time.monotonic()
    probe = probe_vulkan(loader=lib, timeout=3)
    elapsed = time.monotonic() - t0
    assert probe.problem is not None and probe.problem.kind == "timeout"
    assert "did not answer within 3 s" in probe.notes[0]
    assert elapsed < 10


@needs_cc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds a Linux shared library")
def test_a_loader_without_functions_is_a_note(tmp_path):
    lib = _fake_loader(tmp_path, "")  # answers NULL for every function
    probe = probe_vulkan(loader=lib)
    assert probe.problem is not None and probe.problem.kind == "vulkan_error"
    assert "vkEnumerateInstanceExtensionProperties" in probe.notes[0]


@needs_lavapipe
def test_unknown_subgroup_facts_are_said(lavapipe_probe):
    """A loader that does not report VkPhysicalDeviceSubgroupProperties leaves refused_ops empty: DSV4_HC_COMB is
    then assumed to run on the device, and both the probe and detection say so rather than assume it silently."""
    from app.devices.detect import _with_vulkan_limits
    from app.devices.records import Device

    raw = replace(lavapipe_probe.devices[0].raw, subgroup_size=None)
    devs, _ = derive([raw], {"GGML_VK_VISIBLE_DEVICES": "0"})
    assert any("DSV4_HC_COMB is assumed supported" in n for n in devs[0].notes)
    known, _ = derive([lavapipe_probe.devices[0].raw], {"GGML_VK_VISIBLE_DEVICES": "0"})
    assert not any("DSV4_HC_COMB" in n for n in known[0].notes)
    probe = replace(lavapipe_probe, devices=tuple(devs))
    errors: list = []
    out = _with_vulkan_limits([Device("Vulkan0", "gpu", "llvmpipe")], {}, lambda env: probe, errors)
    assert out[0].refused_ops == ()
    assert len(errors) == 1 and "subgroup facts of Vulkan0 unknown" in errors[0].message
    errors = []
    out = _with_vulkan_limits([Device("Vulkan0", "gpu", "llvmpipe")], {}, lambda env: lavapipe_probe, errors)
    assert out[0].refused_ops == ("DSV4_HC_COMB",) and errors == []
