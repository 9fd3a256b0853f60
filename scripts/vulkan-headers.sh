#!/usr/bin/env bash
# Newer Vulkan headers for building llama.cpp's Vulkan backend on Debian 12, whose libvulkan-dev (1.3.239)
# is too old for the pinned llama.cpp. Fetches Debian 13's libvulkan-dev (1.4.x) with apt-get download
# (nothing is installed system-wide) and unpacks its include folder into DEST (default
# ~/.cache/layerdeck/vulkan-headers). Prints DEST; pass it as LAYERDECK_VULKAN_HEADERS to the builder.
set -euo pipefail
dest="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/layerdeck/vulkan-headers}"
if [ -f "$dest/include/vulkan/vulkan.h" ]; then echo "$dest"; exit 0; fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
cat > "$work/trixie.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt_opts=(-o "Dir::Etc::SourceList=$work/trixie.sources" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update -qq >&2
(cd "$work" && apt-get "${apt_opts[@]}" download libvulkan-dev >&2)
dpkg -x "$work"/libvulkan-dev_*.deb "$work/x"
mkdir -p "$dest"
rm -rf "$dest/include.tmp" && cp -r "$work/x/usr/include" "$dest/include.tmp" && mv "$dest/include.tmp" "$dest/include"
echo "$dest"
