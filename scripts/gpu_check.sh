#!/usr/bin/env bash
# Check device detection on a machine with an NVIDIA GPU: build a CUDA + RPC llama-server from the
# same llama-cpp-python sdist the tests use, run `python -m app.cli.devices --json` with it, and
# verify that every CUDA<i> was tied to its NVML GPU by PCI bus id (not guessed).
#
# Needs: the NVIDIA driver, the CUDA toolkit (nvcc), cmake >= 3.24, a C++ compiler, and Python with
# psutil + nvidia-ml-py. The only network access is `pip download` of the sdist from PyPI.
#
#   scripts/gpu_check.sh [WORKDIR]        (default: ~/.cache/layerdeck/gpu-check-<version>)
#   CMAKE_CUDA_ARCHITECTURES=90 scripts/gpu_check.sh   # default: the GPUs present (native)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
cd "$ROOT"
VERSION="$("$PY" -c 'from app.llamacpp.build import PINNED_VERSION; print(PINNED_VERSION)')"
WORK="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/layerdeck/gpu-check-$VERSION}"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
BUILD="$WORK/build-cuda"

command -v nvcc >/dev/null || { echo "error: nvcc (the CUDA toolkit) is not on PATH" >&2; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi -L

mkdir -p "$WORK"
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    "$PY" -m pip download --no-deps --no-binary :all: --dest "$WORK" "llama-cpp-python==$VERSION"
    tar -xzf "$WORK/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
fi

# The UI options keep CMake from downloading the web UI; no other flag needs the network.
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DGGML_RPC=ON \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-native}"
cmake --build "$BUILD" --config Release --target llama-server -j "$(nproc)"
BIN="$BUILD/bin"

echo "== llama-server --list-devices"
"$BIN/llama-server" --list-devices

echo "== layerdeck devices"
"$PY" -m app.cli.devices --llama-dir "$BIN" || true   # exit 1 only concerns RPC hosts
"$PY" -m app.cli.devices --json --llama-dir "$BIN" > "$WORK/devices.json" || true

echo "== checks"
"$PY" - "$WORK/devices.json" <<'PYEOF'
import json, sys
from app.devices.match import BY_DRIVER

data = json.load(open(sys.argv[1]))
cuda = [d for d in data["devices"] if d["name"].startswith("CUDA")]
problems = []
if not data["llama_cpp"]["listed"]:
    problems.append("llama-server --list-devices did not run")
if not cuda:
    problems.append("no CUDA device listed")
for d in cuda:
    print(f"{d['name']}: {d['description']} pci={d['pci_bus_id']} uuid={d['uuid']} "
          f"total={d['total_bytes'] / 2**30:.1f} GiB bandwidth={(d['bandwidth_bytes_per_s'] or 0) / 1e9:.0f} GB/s "
          f"pcie={d['pcie']} numa={d['numa_node']} match={d['sources'].get('match')}")
    if d["name_guessed"] or d["sources"].get("match") != BY_DRIVER or not d["pci_bus_id"]:
        problems.append(f"{d['name']} was not matched by PCI bus id")
    problems += [f"{d['name']}: could not read {k}: {v}" for k, v in d["errors"].items()]
for e in data["errors"]:
    print(f"source error: {e['source']}: {e['message']}")
print("OK" if not problems else "PROBLEMS:\n  " + "\n  ".join(problems))
sys.exit(1 if problems else 0)
PYEOF

echo "== telemetry cost"
"$PY" benchmarks/bench_telemetry.py --samples 200
