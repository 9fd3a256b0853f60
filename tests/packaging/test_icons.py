"""The app icon: the committed PNG/ICO/ICNS files are valid, and packaging/make_icons.py regenerates them."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
ICONS = ROOT / "resources" / "icons"


def _make_icons():
    spec = importlib.util.spec_from_file_location("make_icons", ROOT / "packaging" / "make_icons.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ico_sizes(data: bytes) -> list[int]:
    reserved, kind, count = struct.unpack_from("<HHH", data)
    assert (reserved, kind) == (0, 1), "not an ICO file"
    sizes = []
    for i in range(count):
        w, h, _, _, planes, bpp, length, offset = struct.unpack_from("<BBBBHHII", data, 6 + 16 * i)
        assert w == h and bpp == 32 and offset + length <= len(data)
        blob = data[offset:offset + length]
        size = w or 256
        if blob.startswith(b"\x89PNG"):
            assert struct.unpack(">II", blob[16:24]) == (size, size)
        else:  # BITMAPINFOHEADER: height counts the AND mask too
            hdr, bw, bh = struct.unpack_from("<Iii", blob)
            assert (hdr, bw, bh) == (40, size, 2 * size)
        sizes.append(size)
    return sizes


def icns_elements(data: bytes) -> dict[bytes, bytes]:
    assert data[:4] == b"icns" and struct.unpack(">I", data[4:8])[0] == len(data)
    out, pos = {}, 8
    while pos < len(data):
        kind, length = data[pos:pos + 4], struct.unpack(">I", data[pos + 4:pos + 8])[0]
        assert length >= 8 and pos + length <= len(data)
        out[kind] = data[pos + 8:pos + length]
        pos += length
    return out


# Qt's ICNS reader warns about the table of contents that iconutil and Pillow write too (and then
# reads every image): the warning is not about these files.
@pytest.mark.qt_log_ignore("QICNSHandler::scanDevice")
def test_committed_icons_are_valid(qapp):
    from PySide6.QtGui import QImage, QImageReader

    mk = _make_icons()
    assert (ICONS / "layerdeck.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
    for name, size in [("layerdeck.png", 256)] + [(f"layerdeck-{s}.png", s) for s in mk.PNG_SIZES]:
        img = QImage(str(ICONS / name))
        assert not img.isNull() and (img.width(), img.height()) == (size, size), name
        assert img.hasAlphaChannel() and img.pixelColor(0, 0).alpha() < 64, f"{name}: corners are transparent"
        assert img.pixelColor(size // 2, size // 2).alpha() == 255, f"{name}: the middle is opaque"
    assert sorted(ico_sizes((ICONS / "layerdeck.ico").read_bytes())) == sorted(mk.ICO_SIZES)
    elements = icns_elements((ICONS / "layerdeck.icns").read_bytes())
    for kind, size in mk.ICNS_TYPES:
        png = elements[kind]
        assert png.startswith(b"\x89PNG") and struct.unpack(">II", png[16:24]) == (size, size), kind
    # Qt's own ICO and ICNS readers find every image
    for name, count in (("layerdeck.ico", len(mk.ICO_SIZES)), ("layerdeck.icns", len(mk.ICNS_TYPES))):
        reader = QImageReader(str(ICONS / name))
        assert reader.imageCount() == count and not reader.read().isNull(), name


def test_make_icons_regenerates_the_set(qapp, tmp_path):
    mk = _make_icons()
    written = {p.name for p in mk.make_icons(ICONS / "layerdeck.svg", tmp_path)}
    committed = {p.name for p in ICONS.iterdir() if p.suffix in (".png", ".ico", ".icns")}
    assert written == committed
    assert ico_sizes((tmp_path / "layerdeck.ico").read_bytes()) == sorted(mk.ICO_SIZES)
    assert set(icns_elements((tmp_path / "layerdeck.icns").read_bytes())) == {k for k, _ in mk.ICNS_TYPES} | {b"TOC "}
