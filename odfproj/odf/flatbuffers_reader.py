"""Reading FlatBuffers tables with ``struct`` alone: the decoding half of ``odf.flatbuffers_codec``.

Why not the flatbuffers library's ``Table``: its package imports numpy whenever numpy is installed
(0.08 s, a fifth of a small command's start), and every command that reads a metadata block (``log``,
``show``, ``query``, a plan of a small project) would pay it for a few offset reads. Its ``Get`` also
type-checks every offset in Python. Reading needs only what the FlatBuffers format defines: a table
starts with a signed offset back to its vtable; a vtable lists, per field slot, the field's offset
inside the table (0: absent); strings and vectors are a ``uint32`` length after a forward offset; all
little-endian. Writing still uses the library's ``Builder`` (imported by the encoder when it runs).

Malformed input raises ``struct.error`` or ``IndexError``, which the codec turns into one
``SerializationError`` naming what it decoded.
"""

from __future__ import annotations

import struct

__all__ = ["SCALARS", "Table"]

#: How a scalar of each schema kind is stored.
SCALARS: dict[str, struct.Struct] = {
    "bool": struct.Struct("<?"),
    "uint8": struct.Struct("<B"),
    "int8": struct.Struct("<b"),
    "uint16": struct.Struct("<H"),
    "int16": struct.Struct("<h"),
    "uint32": struct.Struct("<I"),
    "int32": struct.Struct("<i"),
    "uint64": struct.Struct("<Q"),
    "int64": struct.Struct("<q"),
    "float32": struct.Struct("<f"),
    "float64": struct.Struct("<d"),
}
_UOFFSET = SCALARS["uint32"]
_SOFFSET = SCALARS["int32"]
_VOFFSET = SCALARS["uint16"]


class Table:
    """One table of a buffer: ``buf`` the whole buffer, ``pos`` where the table starts."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    @classmethod
    def root(cls, buf: bytes | bytearray | memoryview) -> Table:
        """The root table: its position is the buffer's first ``uint32``."""
        return cls(buf, _UOFFSET.unpack_from(buf, 0)[0])

    def offset(self, slot: int) -> int:
        """The field's offset inside the table, 0 when absent (or beyond the vtable of an older writer)."""
        vtable = self.pos - _SOFFSET.unpack_from(self.buf, self.pos)[0]
        entry = 4 + 2 * slot
        if entry < _VOFFSET.unpack_from(self.buf, vtable)[0]:
            return _VOFFSET.unpack_from(self.buf, vtable + entry)[0]
        return 0

    def scalar(self, slot: int, kind: str, default: object) -> object:
        """The scalar in ``slot`` stored as ``kind`` (a key of ``SCALARS``), or ``default`` when absent."""
        o = self.offset(slot)
        return SCALARS[kind].unpack_from(self.buf, self.pos + o)[0] if o else default

    def get(self, kind: str, at: int) -> object:
        """The scalar of ``kind`` at absolute position ``at``."""
        return SCALARS[kind].unpack_from(self.buf, at)[0]

    def indirect(self, at: int) -> int:
        """The position a forward offset stored at ``at`` points to."""
        return at + _UOFFSET.unpack_from(self.buf, at)[0]

    def string(self, at: int) -> bytes:
        """The bytes of the string whose offset is stored at ``at``."""
        start = self.indirect(at)
        length = _UOFFSET.unpack_from(self.buf, start)[0]
        return bytes(self.buf[start + 4 : start + 4 + length])

    def vector(self, o: int) -> tuple[int, int]:
        """Where the elements of the vector in the field at table offset ``o`` start, and how many."""
        start = self.indirect(self.pos + o)
        return start + 4, _UOFFSET.unpack_from(self.buf, start)[0]

    def byte_vector(self, o: int) -> memoryview:
        """The bytes of the ``[ubyte]`` vector in the field at table offset ``o``."""
        start, length = self.vector(o)
        return memoryview(self.buf)[start : start + length]
