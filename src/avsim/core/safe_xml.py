"""XML from untrusted files (OpenDRIVE, Lanelet2 OSM): no DTD, no entities, bounded size and depth.

Python's own parsers expand internal entities (a "billion laughs" document is a few hundred
bytes) and accept a DOCTYPE. `read_xml` builds the tree itself on expat and refuses, as
defusedxml does, any DOCTYPE, entity declaration or external reference; it checks the file size
before reading and the nesting depth and element count while parsing. Every problem is one
`AvsimInputError(path, field, reason)` naming the file and, where known, the line.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NoReturn
from xml.parsers import expat

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import regular_file

MAX_XML_BYTES = 512 * 1024**2  # CARLA's largest town map is 3.4 MB; city-scale OpenDRIVE files reach ~200 MB
MAX_XML_DEPTH = 64  # OpenDRIVE nests to ~10, OSM to 3
MAX_XML_ELEMENTS = 20_000_000


class _Refused(Exception):
    """Raised inside an expat handler; turned into AvsimInputError with the parser's line."""


def _refuse(what: str) -> NoReturn:
    raise _Refused(what)


class _Builder:
    """Builds `xml.etree.ElementTree` elements from expat events, with depth and count limits."""

    def __init__(self, max_depth: int, max_elements: int) -> None:
        self.builder = ET.TreeBuilder()
        self.depth = 0
        self.count = 0
        self.max_depth = max_depth
        self.max_elements = max_elements

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        self.count += 1
        if self.depth > self.max_depth:
            _refuse(f"elements nested deeper than {self.max_depth}")
        if self.count > self.max_elements:
            _refuse(f"more than {self.max_elements} elements")
        self.builder.start(tag, attrs)

    def end(self, tag: str) -> None:
        self.depth -= 1
        self.builder.end(tag)

    def data(self, text: str) -> None:
        self.builder.data(text)


def parse_xml(data: bytes, source: str | os.PathLike[str], *, max_depth: int = MAX_XML_DEPTH,
              max_elements: int = MAX_XML_ELEMENTS) -> ET.Element:
    """Parse an XML document safely (see the module docstring).

    Args:
        data: the document's bytes (encoding from its declaration, UTF-8 by default).
        source: the file it came from, named in errors.
        max_depth: deepest element nesting accepted.
        max_elements: most elements accepted.

    Returns:
        The root element.
    """
    builder = _Builder(max_depth, max_elements)
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.ordered_attributes = False
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    parser.StartDoctypeDeclHandler = lambda *_args: _refuse("a DOCTYPE declaration is not accepted (DTDs and entities are refused)")
    parser.EntityDeclHandler = lambda *_args: _refuse("an entity declaration is not accepted")
    parser.UnparsedEntityDeclHandler = lambda *_args: _refuse("an unparsed entity declaration is not accepted")
    parser.ExternalEntityRefHandler = lambda *_args: _refuse("an external entity reference is not accepted")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    try:
        parser.Parse(data, True)
    except _Refused as exc:
        raise AvsimInputError(source, f"line {parser.CurrentLineNumber}", str(exc)) from None
    except expat.ExpatError as exc:
        raise AvsimInputError(source, f"line {exc.lineno}", f"not well-formed XML: {expat.ErrorString(exc.code)}") from None
    except RecursionError:
        raise AvsimInputError(source, "xml", "nested too deeply") from None
    root = builder.builder.close()
    return root


def read_xml(path: str | os.PathLike[str], field: str = "xml", max_bytes: int = MAX_XML_BYTES, **limits: int) -> ET.Element:
    """Read and parse an XML file safely, refusing files over `max_bytes` before reading them.

    Args:
        path: the file.
        field: the field named when the file itself is at fault (missing, too large).
        max_bytes: the largest file accepted.
        **limits: `max_depth`, `max_elements` of `parse_xml`.

    Returns:
        The root element.
    """
    p = regular_file(Path(path), field)
    size = p.stat().st_size
    if size > max_bytes:
        raise AvsimInputError(p, field, f"{size} bytes is over the {max_bytes}-byte limit for XML files")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise AvsimInputError(p, field, f"cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise AvsimInputError(p, field, "empty file")
    return parse_xml(data, p, **limits)
