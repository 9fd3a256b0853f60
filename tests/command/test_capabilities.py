"""The command follows what the user's build accepts (read from its --help)."""

from app.llamacpp.capabilities import parse_help
from app.lanes import Lane
from app.memory.settings import LlamaSettings
from app.model.demo import load_demo
from app.placement.command import build_command
from app.command.spec import InexpressibleError
from app.placement.presets import experts_to_cpu

import pytest

NEW = """
-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto', default: 'auto')
-lm,   --load-mode MODE                 how to load the model: auto, none, mmap, mlock
-ngl,  --gpu-layers, --n-gpu-layers N   max. number of layers to store in VRAM
-ts,   --tensor-split N0,N1,N2,...      fraction of the model to offload to each GPU
-dev,  --device <dev1,dev2,..>          comma-separated list of devices to use for offloading
-ot,   --override-tensor <tensor name pattern>=<buffer type>,...
-cmoe, --cpu-moe                        keep all Mixture of Experts (MoE) weights in the CPU
-c,    --ctx-size N                     size of the prompt context
-fit,  --fit [on|off]                   whether to adjust unset arguments to fit in device memory
"""
OLD = """
-fa,   --flash-attn                     enable Flash Attention (default: disabled)
--no-mmap                               do not memory-map model
-ngl,  --gpu-layers, --n-gpu-layers N   number of layers to store in VRAM
-ts,   --tensor-split N0,N1,N2,...      fraction of the model to offload to each GPU
-dev,  --device <dev1,dev2,..>          comma-separated list of devices to use for offloading
-c,    --ctx-size N                     size of the prompt context
"""

GiB = 1 << 30


def placement():
    m = load_demo()
    devs = [Lane("CUDA0", "CUDA0", 24 * GiB, 24 * GiB)]
    return experts_to_cpu(m, devs, LlamaSettings(n_ctx=8192, flash_attn="on", load_mode="none"))


def test_current_build_spelling():
    argv = build_command(placement(), "m.gguf", caps=parse_help(NEW)).argv
    assert argv[argv.index("-fa") + 1] == "on" and argv[argv.index("-lm") + 1] == "none"
    assert "-cmoe" in argv and argv[-2:] == ["--fit", "off"]


def test_old_build_spelling_and_what_it_cannot_express():
    caps = parse_help(OLD)
    assert not caps.fa_value and caps.has("--no-mmap") and not caps.has("--fit")
    p = placement()
    p.settings.load_mode = "none"
    with pytest.raises(InexpressibleError, match="does not accept -cmoe"):
        build_command(p, "m.gguf", caps=caps)  # this build has no expert overrides at all
    p2 = placement()
    for b in p2.model.blocks:
        if b.role.value == "experts":
            p2.assign(b.id, "CUDA0")
    cmd = build_command(p2, "m.gguf", caps=caps)
    assert "--no-mmap" in cmd.argv and "-fa" in cmd.argv and "on" not in cmd.argv[cmd.argv.index("-fa"):][:2][1:]
    assert "--fit" not in cmd.argv and any("no --fit" in n for n in cmd.notes)


def test_cuda_visible_devices_renames_devices_only_when_asked():
    from app.placement import CPU
    from app.command.formats import render
    from app.placement.presets import all_on_gpus

    m = load_demo()
    devs = [Lane(f"CUDA{i}", f"CUDA{i}", 24 * GiB, 24 * GiB) for i in range(3)]
    p = all_on_gpus(m, [devs[0], devs[2]], LlamaSettings(n_ctx=4096))
    p.devices = devs
    p.assign("3:experts", "CUDA0")
    p.assign("40:experts", CPU)
    plain = build_command(p, "m.gguf")
    assert plain.env == {} and "CUDA_VISIBLE_DEVICES" not in render(plain.argv, "bash", env=plain.env)
    cmd = build_command(p, "m.gguf", cuda_order=[2, 0])  # today's CUDA2 first, CUDA1 hidden
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "2,0"}
    assert cmd.argv[cmd.argv.index("-dev") + 1] == "CUDA1,CUDA0"
    assert render(cmd.argv, "bash", env=cmd.env).startswith("CUDA_VISIBLE_DEVICES=2,0 ")
    with pytest.raises(InexpressibleError, match="hides it"):
        build_command(p, "m.gguf", cuda_order=[2])
