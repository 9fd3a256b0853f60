"""Render Layerdeck's app icon from ``resources/icons/layerdeck.svg``.

Writes, next to the SVG (or into ``--out DIR``):

* ``layerdeck.png`` (256 px) and ``layerdeck-<N>.png`` for N in :data:`PNG_SIZES`
  (the hicolor sizes the .deb installs),
* ``layerdeck.ico`` (Windows: 16-256 px; BMP entries below 256 px, a PNG entry at 256 px),
* ``layerdeck.icns`` (macOS: PNG entries 32-1024 px, the same set ``iconutil`` writes).

The SVG is rendered with Qt's ``QSvgRenderer`` (QtSvg ships in PySide6-Essentials).
The ICO and ICNS containers are written here (both formats are a header and a
table of images), so nothing beyond PySide6 is needed.

Run it after editing the SVG and commit the results::

    QT_QPA_PLATFORM=offscreen python packaging/make_icons.py
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ICON_DIR = ROOT / "resources" / "icons"
SVG = ICON_DIR / "layerdeck.svg"

PNG_SIZES = (16, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# ICNS element types holding PNG data, with their pixel sizes (the set iconutil and Pillow write).
ICNS_TYPES = (
    (b"ic11", 32),    # 16x16@2x
    (b"ic12", 64),    # 32x32@2x
    (b"ic07", 128),   # 128x128
    (b"ic13", 256),   # 128x128@2x
    (b"ic08", 256),   # 256x256
    (b"ic14", 512),   # 256x256@2x
    (b"ic09", 512),   # 512x512
    (b"ic10", 1024),  # 512x512@2x
)


def _qt():
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    return QGuiApplication.instance() or QGuiApplication(sys.argv[:1])


def render(svg: Path, size: int):
    """The SVG drawn into a ``size`` x ``size`` ARGB32 QImage (straight alpha)."""
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not a valid SVG")
    img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(Qt.GlobalColor.transparent)
    painter = QPainter(img)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return img.convertToFormat(QImage.Format.Format_ARGB32)


def png_bytes(img) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice

    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not img.save(buf, "PNG"):
        raise RuntimeError("Qt could not encode a PNG")
    buf.close()
    return bytes(data.data())


def _bgra_rows(img) -> list[bytes]:
    """Rows of a Format_ARGB32 image as little-endian BGRA bytes, top row first."""
    w, h = img.width(), img.height()
    bpl = img.bytesPerLine()
    raw = bytes(img.constBits())[: bpl * h]
    if sys.byteorder != "little":  # ARGB32 is stored as native 32-bit words
        raw = b"".join(struct.pack("<%dI" % (bpl // 4), *struct.unpack(">%dI" % (bpl // 4), raw[i:i + bpl]))
                       for i in range(0, len(raw), bpl))
    return [raw[y * bpl: y * bpl + w * 4] for y in range(h)]


def dib_bytes(img) -> bytes:
    """An ICO image entry in BMP (DIB) form: BITMAPINFOHEADER, 32-bit BGRA bottom-up, AND mask."""
    w, h = img.width(), img.height()
    rows = _bgra_rows(img)
    header = struct.pack("<IiiHHIIiiII", 40, w, h * 2, 1, 32, 0, 0, 0, 0, 0, 0)
    xor = b"".join(reversed(rows))
    mask_stride = ((w + 31) // 32) * 4
    mask_rows = []
    for row in reversed(rows):
        bits = bytearray(mask_stride)
        for x in range(w):
            if row[x * 4 + 3] == 0:  # fully transparent: set the AND bit
                bits[x // 8] |= 0x80 >> (x % 8)
        mask_rows.append(bytes(bits))
    return header + xor + b"".join(mask_rows)


def ico_bytes(images: dict[int, object]) -> bytes:
    """A Windows .ico holding every image of ``images`` (size -> QImage)."""
    sizes = sorted(images)
    blobs = [png_bytes(images[s]) if s >= 256 else dib_bytes(images[s]) for s in sizes]
    out = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    for s, blob in zip(sizes, blobs, strict=True):
        dim = 0 if s >= 256 else s  # 0 means 256
        out += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(blob), offset)
        offset += len(blob)
    return out + b"".join(blobs)


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """A macOS .icns with a table of contents and PNG elements (``pngs``: size -> PNG data)."""
    elements = [(kind, pngs[size]) for kind, size in ICNS_TYPES]
    toc = b"TOC " + struct.pack(">I", 8 + 8 * len(elements))
    toc += b"".join(kind + struct.pack(">I", 8 + len(data)) for kind, data in elements)
    body = toc + b"".join(kind + struct.pack(">I", 8 + len(data)) + data for kind, data in elements)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def make_icons(svg: Path = SVG, out: Path | None = None) -> list[Path]:
    """Render every icon file from ``svg`` into ``out`` (default: the SVG's folder); return their paths."""
    _qt()
    out = Path(out or svg.parent)
    out.mkdir(parents=True, exist_ok=True)
    sizes = sorted(set(PNG_SIZES) | set(ICO_SIZES) | {s for _, s in ICNS_TYPES})
    images = {s: render(svg, s) for s in sizes}
    pngs = {s: png_bytes(images[s]) for s in sizes}
    written: list[Path] = []

    def write(name: str, data: bytes) -> None:
        p = out / name
        p.write_bytes(data)
        written.append(p)

    write("layerdeck.png", pngs[256])
    for s in PNG_SIZES:
        write(f"layerdeck-{s}.png", pngs[s])
    write("layerdeck.ico", ico_bytes({s: images[s] for s in ICO_SIZES}))
    write("layerdeck.icns", icns_bytes(pngs))
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--svg", type=Path, default=SVG, help="source SVG (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: the SVG's folder)")
    args = ap.parse_args(argv)
    for p in make_icons(args.svg, args.out):
        print(f"{p}  {p.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
