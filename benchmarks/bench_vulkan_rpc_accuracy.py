"""The accuracy matrix on a Vulkan0 behind RPC: ``bench_vulkan_accuracy.py --behind-rpc``.

A Vulkan ``ggml-rpc-server`` on loopback serves Mesa's lavapipe; the CPU build of llama-fit-params is its
client, so the device is ``RPC0`` to llama.cpp (an RPC backend with the server's buffer limits). Every full-size
case of tests/memory/accuracy.py on that device, against the estimate for the same device as Layerdeck detects it.

    python benchmarks/bench_vulkan_rpc_accuracy.py [case-substring ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vulkan_accuracy import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(["--behind-rpc", *sys.argv[1:]]))
