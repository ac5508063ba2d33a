"""Image files from anyone: the frame size is read from the header before anything is decoded.

OpenCV decodes a 20000x20000 PNG into a 1.2 GB array (or fails with a traceback of its own) and
reads a FIFO forever; `read_image_rgb` checks the file kind and the size from the PNG, JPEG or
BMP header first (`MAX_FRAME_SIDE_PX`, the limit video frames have: "too large", not "corrupt").
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import cv2
import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import regular_file
from avsim.core.typing import NDArrayByte
from avsim.core.video import check_frame_size

_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}  # start-of-frame markers
_HEADER_BYTES = 1 << 20  # JPEG frames may come after large EXIF/ICC segments


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the first start-of-frame segment of a JPEG's first bytes."""
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _JPEG_SOF:
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(width), int(height)
        i += 2 + length
    return None


def image_size_px(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(width, height) of a PNG, JPEG or BMP from its header (None for another or an unreadable header).

    Args:
        path: the image file.

    Returns:
        The size in pixels, or None when the header does not say.
    """
    with open(path, "rb") as fh:
        data = fh.read(_HEADER_BYTES)
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    if data[:2] == b"BM" and len(data) >= 26:
        width, height = struct.unpack("<ii", data[18:26])
        return abs(int(width)), abs(int(height))
    return None


def read_image_rgb(path: str | os.PathLike[str]) -> NDArrayByte:
    """Decode one image after checking its kind and header size.

    Args:
        path: a PNG, JPEG or BMP file (other formats OpenCV reads are decoded unchecked).

    Returns:
        (H, W, 3) uint8 RGB.
    """
    p = regular_file(Path(path), "image")
    size = image_size_px(p)
    if size is not None:
        check_frame_size(p, *size)
    img = cv2.imread(str(p), cv2.IMREAD_COLOR)
    if img is None:
        raise AvsimInputError(p, "image", "cannot decode image")
    return np.ascontiguousarray(np.asarray(img, dtype=np.uint8)[..., ::-1])
