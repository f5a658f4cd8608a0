"""The small parts of a static figure: plotly's text and arrays read, colours mapped, cells written as a PNG."""

from __future__ import annotations

import base64
import html
import math
import re
import struct
import zlib

import numpy as np

MAX_CELLS = 256  # a heatmap side beyond this is averaged in blocks (the picture is a few hundred pixels wide)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
_TAG = re.compile(r"<[^>]*>")
_BR = re.compile(r"<br\s*/?>", re.I)


def text_lines(label) -> list[str]:
    """Plotly label text as lines of plain, XML-escaped text: split at <br>, other tags dropped, entities decoded
    (plotly shows '&lt;' as '<'); escaping again makes any token safe inside the SVG."""
    return [html.escape(html.unescape(_TAG.sub("", part)), quote=True) for part in _BR.split(str(label or ""))]


def text_of(label) -> str:
    return " · ".join(line for line in text_lines(label) if line)


def array(value) -> np.ndarray:
    """A trace attribute as numpy: a plain list, or plotly's typed array {dtype, bdata, shape}."""
    if isinstance(value, dict) and "bdata" in value:
        out = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]).newbyteorder("<"))
        shape = value.get("shape")
        return out.reshape([int(s) for s in str(shape).split(",")]) if shape else out
    return np.asarray(value if value is not None else [], dtype=object)


def numbers(value) -> np.ndarray:
    """An attribute as float64, None as NaN."""
    a = array(value)
    if a.dtype == object:
        a = np.array(
            [
                [np.nan if v is None else v for v in row]
                if isinstance(row, list | np.ndarray)
                else (np.nan if row is None else row)
                for row in a.tolist()
            ],
            dtype=float,
        )
    return a.astype(float)


def rgb(colour) -> tuple[int, int, int, float]:
    """'#rrggbb', 'rgb(r,g,b)' or 'rgba(r,g,b,a)' as (r, g, b, alpha); anything else grey."""
    colour = str(colour).strip()
    if re.fullmatch(r"#[0-9a-fA-F]{6}", colour):
        return (*(int(colour[i : i + 2], 16) for i in (1, 3, 5)), 1.0)
    nums = re.findall(r"[\d.]+", colour)
    if colour.startswith("rgb") and len(nums) >= 3:
        return (*(int(float(n)) for n in nums[:3]), float(nums[3]) if len(nums) > 3 else 1.0)
    return (128, 128, 128, 1.0)


def colour_cells(z: np.ndarray, scale, zmin: float, zmax: float) -> np.ndarray:
    """z through a plotly colour scale ([[position, colour], ...]) as RGBA uint8; NaN cells transparent."""
    scale = scale if isinstance(scale, list) and scale else [[0, "#ffffff"], [1, "#262730"]]
    stops = np.array([float(p) for p, _ in scale])
    colours = np.array([rgb(c)[:3] for _, c in scale], dtype=float)
    t = np.clip(np.nan_to_num((z - zmin) / ((zmax - zmin) or 1.0)), 0, 1)
    out = np.zeros((*z.shape, 4), dtype=np.uint8)
    for channel in range(3):
        out[..., channel] = np.interp(t, stops, colours[:, channel]).round()
    out[..., 3] = np.where(np.isnan(z), 0, 255)
    return out


def shrink(z: np.ndarray, most: int = MAX_CELLS) -> np.ndarray:
    """Average blocks of cells so neither side exceeds `most` (NaN-aware)."""
    rows, cols = z.shape
    fr, fc = math.ceil(rows / most), math.ceil(cols / most)
    if fr == 1 and fc == 1:
        return z
    pad = np.full((math.ceil(rows / fr) * fr, math.ceil(cols / fc) * fc), np.nan)
    pad[:rows, :cols] = z
    blocks = pad.reshape(pad.shape[0] // fr, fr, pad.shape[1] // fc, fc)
    counts = (~np.isnan(blocks)).sum(axis=(1, 3))
    with np.errstate(all="ignore"):
        return np.where(counts > 0, np.nansum(blocks, axis=(1, 3)) / np.maximum(counts, 1), np.nan)


def png(rgba: np.ndarray) -> str:
    """An RGBA uint8 [rows, cols, 4] image as a base64 PNG (zlib only)."""
    rows, cols = rgba.shape[:2]
    raw = b"".join(b"\x00" + rgba[r].tobytes() for r in range(rows))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    head = struct.pack(">IIBBBBB", cols, rows, 8, 6, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    return base64.b64encode(data).decode("ascii")


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values between lo and hi."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
        return [lo] if math.isfinite(lo) else []
    lo, hi = min(lo, hi), max(lo, hi)
    raw = (hi - lo) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if step * m >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


def number(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.2e}"
