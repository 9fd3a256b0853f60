"""Helpers for device tests: sample files and fake sysfs trees."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"


def sample(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def amd_card(n: int, bus: str, total: int, used: int, busy: int = 7, product: str | None = "AMD Radeon RX 7900 XTX",
             link=("16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16"), vendor: str = "0x1002") -> dict[str, str]:
    d = f"sys/class/drm/card{n}/device"
    files = {
        f"{d}/vendor": vendor + "\n",
        f"{d}/device": "0x744c\n",
        f"{d}/uevent": f"DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_SLOT_NAME={bus}\n",
        f"{d}/mem_info_vram_total": f"{total}\n",
        f"{d}/mem_info_vram_used": f"{used}\n",
        f"{d}/gpu_busy_percent": f"{busy}\n",
        f"{d}/current_link_speed": link[0] + "\n",
        f"{d}/current_link_width": link[1] + "\n",
        f"{d}/max_link_speed": link[2] + "\n",
        f"{d}/max_link_width": link[3] + "\n",
        f"{d}/numa_node": "1\n",
        f"{d}/hwmon/hwmon3/temp1_input": "45000\n",
        f"{d}/hwmon/hwmon3/power1_average": "65000000\n",
        f"sys/class/drm/card{n}-DP-1/status": "connected\n",
    }
    if product:
        files[f"{d}/product_name"] = product + "\n"
    return files
