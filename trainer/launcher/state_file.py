# Over 600 lines: one file format (checkpoint format 3), its encoder and decoder kept together so they cannot drift.
"""One rank's checkpoint file: a safetensors file, written from a host-memory snapshot in one pass
and read back into private memory in one pass. Loading it never runs code from the file.

Format (checkpoint format 3; safetensors, https://github.com/huggingface/safetensors, README
"Format")::

    uint64   N, little endian: the size of the header
    header   N bytes of UTF-8 JSON: {"__metadata__": {"format": FORMAT_TAG, "state": "<JSON>"},
             "<tensor name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
             padded with spaces (the spec allows trailing whitespace) so that the data starts
             at a multiple of 4096 (DATA_ALIGN)
    data     every tensor's bytes, back to back, no holes (the spec requires the offsets to
             cover the data exactly); tensors in order of element size, largest first, so each
             starts at a multiple of its element size

Any safetensors reader (`safetensors.torch.load_file`, `safe_open`) reads the tensors; the rest
of the state (the nested dicts, lists and tuples around them, and the numbers, strings, booleans
and None in them) is the JSON text in `__metadata__["state"]`, where a tensor stands as
{"__tensor__": name} (see `_Encoder` for every tag). What the state may hold is that and nothing
else: anything else is refused at save with a TypeError that names its path in the state. The
launcher reads and writes the format with its own code (json, readinto, views of one buffer):
it does not depend on the safetensors package.

Why not `torch.save`: its zip writer hands Python many small writes and cannot overlap hashing
with writing, reading it back copies every record (measured on the same bytes, saving ran at a
quarter of a raw fsync'd write and restoring 18x slower than a raw read), and loading it
unpickles, which can run any code a file on a shared file system brings. Here:

- `Stager.snapshot` is all the training loop waits for: one copy of every tensor into a host
  buffer that is reused from save to save (pinned when CUDA is used, so the device-to-host copies
  run at full PCIe speed) and the JSON of the small rest. `Stager.prepare` allocates and touches
  that buffer before the first save, so the first save blocks no longer than later ones.
- `write_snapshot` writes header and data in 64 MiB pieces while a second thread hashes the same
  pieces from memory (XXH3-128; both release the GIL), then fsyncs and renames: one pass over the
  bytes, no read-back.
- `read_state` reads the file once into a private buffer (anonymous memory, in huge pages where
  the kernel allows them) while a second thread hashes the pieces as they arrive, checks the
  digest before it parses anything, and returns tensors that are views of that buffer: they
  never alias the file, so nothing that happens to the file afterwards (a rewrite, a truncation
  on a shared file system) reaches the restored state.

The digest is XXH3-128, not SHA-256: the marker that records it sits unsigned next to the data,
so it protects against accidental damage (truncation, torn or partial copies, bit rot), never
against someone who can write the directory (which is why loading must not run code either). A
128-bit XXH3 misses an accidental change with probability 2^-128, like SHA-256 in practice, and
runs at memory speed (several GB/s per core, against about 1.7 GB/s for SHA-256 on the same CPU),
so hashing never limits a save or restore.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import math
import mmap
import os
import struct
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import xxhash

DIGEST = "xxh3_128"
DATA_ALIGN = 4096  # data starts on a page: a reader may map it page-aligned
WRITE_PIECE = 64 << 20
# The hasher runs one piece behind the reads, so a small piece ends the restore soon after the
# last read; of 1 to 64 MiB, 4 MiB restored fastest (a 256 MiB file, 2-core development machine).
READ_PIECE = 4 << 20
FORMAT_TAG = "launcher.state_file/3"
# safetensors refuses headers above 100 MB (MAX_HEADER_SIZE in safetensors/src/tensor.rs).
MAX_HEADER_BYTES = 100_000_000
_LENGTH = struct.Struct("<Q")

# The safetensors dtype names (safetensors/src/tensor.rs, `Dtype`; safetensors/torch.py, _TYPES).
_DTYPE_CODES: dict[torch.dtype, str] = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL", torch.complex64: "C64",
}
for _torch_name, _code in (("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64"),
                           ("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
    if isinstance(getattr(torch, _torch_name, None), torch.dtype):
        _DTYPE_CODES[getattr(torch, _torch_name)] = _code
_DTYPES = {code: dtype for dtype, code in _DTYPE_CODES.items()}

# Tags in the state's JSON: an object with exactly one key, one of these, stands for what its
# key names; every other object is a dict with str keys. A dict that JSON cannot carry as an
# object (keys other than str, or one key that is a tag) goes as a list of [key, value] pairs.
_TENSOR = "__tensor__"  # {"__tensor__": "<name in the safetensors header>"}
_TUPLE = "__tuple__"  # {"__tuple__": [items]}
_FLOAT = "__float__"  # {"__float__": "inf" | "-inf" | "nan"}: JSON has no non-finite numbers
_DICT = "__dict__"  # {"__dict__": [[key, value], ...]}
_ODICT = "__odict__"  # {"__odict__": {"items": [[key, value], ...], "_metadata": value}}: an
# OrderedDict, with the `_metadata` attribute that `Module.state_dict()` attaches when it has one
_TAGS = frozenset((_TENSOR, _TUPLE, _FLOAT, _DICT, _ODICT))
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class StateFileError(Exception):
    """A state file is damaged: wrong size, digest, or structure."""


class StateFileDigestError(StateFileError):
    """A state file's bytes do not match the digest it was written with."""


LIVE_STATE_OVERWRITTEN = "live_state_overwritten"
"""The attribute `read_state(..., into=...)` sets (True) on any error raised once some of the
file's bytes were read into the live tensors it was given: they hold unverified data until a
good checkpoint is read into them."""


def overwrote_live_state(error: BaseException) -> bool:
    return bool(getattr(error, LIVE_STATE_OVERWRITTEN, False))

def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


# ------------------------------------------------------------------ encoding


class _Attribute(str):
    """A path step that is an attribute (`._metadata`), not a key."""


def _path(parts: tuple) -> str:
    return "state" + "".join(f".{p}" if isinstance(p, _Attribute) else f"[{p!r}]" for p in parts)


def _type_name(obj: Any) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


class _Encoder:
    """The state as JSON-ready values, every tensor replaced by {"__tensor__": name} and listed in
    `tensors` in the order met."""

    def __init__(self) -> None:
        self.tensors: list[tuple[str, torch.Tensor]] = []
        self._names = {"__metadata__"}

    def value(self, obj: Any, parts: tuple) -> Any:
        t = type(obj)
        if t is str or t is int or t is bool or obj is None:
            return obj
        if t is float:
            return obj if math.isfinite(obj) else {_FLOAT: repr(obj)}  # repr: 'inf', '-inf', 'nan'
        if isinstance(obj, torch.Tensor):
            return {_TENSOR: self._tensor(obj, parts)}
        if t is list:
            return [self.value(v, (*parts, i)) for i, v in enumerate(obj)]
        if t is tuple:
            return {_TUPLE: [self.value(v, (*parts, i)) for i, v in enumerate(obj)]}
        if t is dict and all(type(k) is str for k in obj) and not (len(obj) == 1 and next(iter(obj)) in _TAGS):
            return {k: self.value(v, (*parts, k)) for k, v in obj.items()}
        if t is dict or t is OrderedDict:
            items = [[self._key(k, parts), self.value(v, (*parts, k))] for k, v in obj.items()]
            if t is dict:
                return {_DICT: items}
            attributes = vars(obj)
            if set(attributes) - {"_metadata"}:
                raise TypeError(f"{_path(parts)}: an OrderedDict with attributes {sorted(attributes)} cannot go into "
                                "a checkpoint: only `_metadata` (what Module.state_dict() attaches) is kept")
            out: dict[str, Any] = {"items": items}
            if "_metadata" in attributes:
                out["_metadata"] = self.value(attributes["_metadata"], (*parts, _Attribute("_metadata")))
            return {_ODICT: out}
        raise TypeError(f"{_path(parts)}: {_type_name(obj)} cannot go into a checkpoint: a state may hold "
                        "dicts, OrderedDicts, lists, tuples, str, int, float, bool, None and dense tensors")

    def _key(self, key: Any, parts: tuple) -> Any:
        t = type(key)
        if t is tuple:
            return {_TUPLE: [self._key(k, parts) for k in key]}
        if t in (str, int, bool, float) or key is None:
            return self.value(key, parts)
        raise TypeError(f"{_path(parts)}: a key of type {_type_name(key)} ({key!r}) cannot go into a checkpoint: "
                        "keys may be str, int, float, bool, None or tuples of them")

    def _tensor(self, t: torch.Tensor, parts: tuple) -> str:
        if t.layout != torch.strided or t.is_quantized:
            raise TypeError(f"{_path(parts)}: a {t.layout} tensor: only dense tensors are supported")
        if t.dtype not in _DTYPE_CODES:
            raise TypeError(f"{_path(parts)}: a {t.dtype} tensor: safetensors has no such dtype")
        # Names are only for readers of the file (a safetensors tool lists them); the state's
        # JSON refers to each by its name, which must therefore be unique.
        name = ".".join(str(p) for p in parts) or "tensor"
        if name in self._names:
            name = f"{name}#{len(self.tensors)}"
        while name in self._names:
            name += "#"
        self._names.add(name)
        self.tensors.append((name, t))
        return name


@dataclass(frozen=True)
class _Layout:
    """Where every tensor of a state goes in the file, and the file's header."""

    prefix: bytes
    """The 8-byte header size and the padded header: everything before the data."""
    tensors: list[tuple[torch.Tensor, int, int]]
    """(tensor, offset in the data, bytes), in file order."""
    data_bytes: int

    @classmethod
    def of(cls, state: Any) -> _Layout:
        if sys.byteorder != "little":
            raise TypeError("checkpoint files are little endian (safetensors): this machine is not")
        encoder = _Encoder()
        tree = encoder.value(state, ())
        # Largest elements first: every offset is then a multiple of its tensor's element size
        # (all element sizes are powers of two), with no padding, which safetensors forbids.
        order = sorted(encoder.tensors, key=lambda named: -named[1].element_size())
        header: dict[str, Any] = {"__metadata__": {
            "format": FORMAT_TAG,
            "state": json.dumps(tree, allow_nan=False, separators=(",", ":")),
        }}
        placed, offset = [], 0
        for name, t in order:
            nbytes = t.numel() * t.element_size()
            header[name] = {"dtype": _DTYPE_CODES[t.dtype], "shape": list(t.shape),
                            "data_offsets": [offset, offset + nbytes]}
            placed.append((t, offset, nbytes))
            offset += nbytes
        text = json.dumps(header, separators=(",", ":")).encode()
        padded = _align(_LENGTH.size + len(text), DATA_ALIGN) - _LENGTH.size
        if padded > MAX_HEADER_BYTES:
            raise TypeError(f"checkpoint state too complex: its header would take {padded} bytes, "
                            f"safetensors reads at most {MAX_HEADER_BYTES}")
        return cls(_LENGTH.pack(padded) + text + b" " * (padded - len(text)), placed, offset)


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of a state in host memory, ready to be written."""

    prefix: bytes
    """The header size and the padded header."""
    data: memoryview
    """The tensors' bytes: a view of the stager's buffer, valid until its next snapshot."""
    owner: torch.Tensor | None = None
    """The buffer `data` views, kept alive as long as this snapshot is (`data` does not)."""

    @property
    def nbytes(self) -> int:
        return len(self.prefix) + len(self.data)

    def pieces(self) -> Iterator[memoryview]:
        yield memoryview(self.prefix)
        for start in range(0, len(self.data), WRITE_PIECE):
            yield self.data[start:start + WRITE_PIECE]


class Stager:
    """Copies states into one host buffer, reused while the state's size does not grow."""

    def __init__(self) -> None:
        self._buffer: torch.Tensor | None = None

    def prepare(self, state: Any) -> int:
        """Allocate and touch the buffer for a state like `state` (the same tensor sizes), so the
        first `snapshot` finds it ready: allocating is cheap, but each page of fresh memory
        costs a fault when first written, and those faults made the first snapshot of a process
        8-14x slower than later ones. Also refuses what a snapshot would refuse, before the first
        step rather than at the first save. Returns the buffer's size in bytes."""
        layout = _Layout.of(state)
        buffer = self._buffer_of(max(layout.data_bytes, 1), pinned=_on_cuda(layout))
        buffer[::mmap.PAGESIZE].fill_(0)  # one write per page faults it in; pinned memory already is
        return buffer.numel()

    def snapshot(self, state: Any) -> Snapshot:
        layout = _Layout.of(state)
        on_cuda = _on_cuda(layout)
        buffer = self._buffer_of(max(layout.data_bytes, 1), pinned=on_cuda)
        for t, start, nbytes in layout.tensors:
            if nbytes:
                buffer[start:start + nbytes].view(t.dtype).view(t.shape).copy_(t.detach(), non_blocking=on_cuda)
        if on_cuda:
            torch.cuda.synchronize()  # the copies above are asynchronous into pinned memory
        return Snapshot(prefix=layout.prefix, data=bytes_of(buffer)[:layout.data_bytes], owner=buffer)

    def _buffer_of(self, nbytes: int, *, pinned: bool) -> torch.Tensor:
        buffer = self._buffer
        if buffer is None or buffer.numel() < nbytes or (pinned and not buffer.is_pinned()):
            buffer = self._buffer = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
        return buffer


def _on_cuda(layout: _Layout) -> bool:
    return any(t.is_cuda for t, _, _ in layout.tensors)


def bytes_of(t: torch.Tensor) -> memoryview:
    """A writable byte view of a contiguous CPU tensor's memory, no copy (torch tensors have no
    buffer protocol)."""
    return memoryview((ctypes.c_char * (t.numel() * t.element_size())).from_address(t.data_ptr())).cast("B")


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _Hasher:
    """Hashes pieces in order on its own thread while the caller writes or reads them."""

    def __init__(self) -> None:
        self._digest = xxhash.xxh3_128()
        self._ready = threading.Condition()
        self._queue: list[memoryview | None] = []
        self._thread = threading.Thread(target=self._run, name="checkpoint-hash", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                piece = self._queue.pop(0)
            if piece is None:
                return
            self._digest.update(piece)

    def add(self, piece: memoryview | None) -> None:
        with self._ready:
            self._queue.append(piece)
            self._ready.notify()

    def hexdigest(self) -> str:
        self.add(None)
        self._thread.join()
        return self._digest.hexdigest()


def write_snapshot(fd: int, snapshot: Snapshot) -> dict:
    """Write `snapshot` to the open file `fd`, hashing while writing; fsync. Returns the meta
    the marker records: {"bytes": N, "xxh3_128": hex}."""
    hasher = _Hasher()
    try:
        for piece in snapshot.pieces():
            hasher.add(piece)
            _write_all(fd, piece)
    finally:
        digest = hasher.hexdigest()
    os.fsync(fd)
    return {"bytes": snapshot.nbytes, DIGEST: digest}


# ------------------------------------------------------------------- reading


def _private_buffer(nbytes: int) -> mmap.mmap | bytearray:
    """`nbytes` of private anonymous memory, in transparent huge pages where the kernel allows
    them: filling fresh 4 KiB pages costs a page fault each, which made reading 256 MiB into a
    `torch.empty` buffer 1.8x slower than into memory already touched, and 2.7x slower than into
    huge pages (measured on the 2-core development machine)."""
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", getattr(mmap, "MAP_ANON", 0))
    try:
        mapping = mmap.mmap(-1, nbytes, flags=flags)
    except (OSError, ValueError, TypeError):  # no anonymous mappings here
        return bytearray(nbytes)
    with contextlib.suppress(AttributeError, OSError):  # no transparent huge pages: 4 KiB pages
        mapping.madvise(mmap.MADV_HUGEPAGE)  # Linux only
    return mapping


def _read_into(f: io.FileIO, path: str, view: memoryview, hasher: _Hasher | None) -> None:
    for start in range(0, len(view), READ_PIECE):
        piece = view[start:start + READ_PIECE]
        done = 0
        while done < len(piece):
            n = f.readinto(piece[done:])
            if not n:
                raise StateFileError(f"{path}: ended after {start + done} bytes while being read")
            done += n
        if hasher is not None:
            hasher.add(piece)


def read_state(path: str, meta: dict, into: Any = None) -> Any:
    """The state saved in `path`, verified against `meta` ({"bytes", "xxh3_128"}; without a
    digest, only the size is checked).

    The file is read once while it is hashed. Without `into`, it is read into private memory and
    nothing is parsed before the digest matches; the tensors returned are writable views of that
    memory, never of the file. With `into` (the live state: a tree like the saved one, e.g.
    {"model": model.state_dict()}), a file of this format (3) is read straight into each live
    CPU tensor at the same place in the tree with the same dtype and shape, and the state returned
    holds those very tensors: one copy from the page cache, none after (only the header, JSON, is
    parsed before the digest is known; it only decides where the bytes go, and a header that does
    not parse sends the file down the first path). An error once bytes reached the live tensors
    (a digest mismatch, a short read) says so (overwrote_live_state).
    Raises StateFileError (StateFileDigestError for a digest mismatch) when the file does not
    match or is not a state file; never runs code from the file."""
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        if size != meta.get("bytes"):
            raise StateFileError(f"{path}: {size} bytes, marker says {meta.get('bytes')}")
        if size < _LENGTH.size:
            raise StateFileError(f"{path}: too short for a header")
        if into is not None:
            try:
                head = _safetensors_head(f, path, size)
            except StateFileError:
                head = None  # a damaged header: read whole and judged by its digest first, as without `into`
            if head is not None:
                return _read_into_live(f, path, meta, head, into)
            f.seek(0)
        buffer = _private_buffer(size)
        view = memoryview(buffer)
        want = meta.get(DIGEST)
        hasher = _Hasher() if want else None
        try:
            _read_into(f, path, view, hasher)
        finally:
            digest = hasher.hexdigest() if hasher is not None else None
    if want and digest != want:
        raise StateFileDigestError(f"{path}: {DIGEST} mismatch (file {digest}, marker {want})")
    return _read_safetensors(path, buffer, view)


@dataclass(frozen=True)
class _Head:
    raw: bytes
    """The file's first bytes: the length and the header, hashed before the data."""
    tree: Any
    spans: list[tuple[int, int, str, torch.dtype, list[int]]]
    """(begin, end, name, dtype, shape) of each tensor in the data, in file order."""


def _safetensors_head(f: io.FileIO, path: str, size: int) -> _Head:
    """The header of a state file; StateFileError for a damaged one."""
    start = f.read(_LENGTH.size)
    (header_bytes,) = _LENGTH.unpack(start)
    if header_bytes > MAX_HEADER_BYTES or _LENGTH.size + header_bytes > size:
        raise StateFileError(f"{path}: not a safetensors file, or its header is damaged")
    header_view = f.read(header_bytes)
    raw = start + header_view
    tree, spans, end = _safetensors_layout(path, memoryview(raw), len(raw), size)
    if len(raw) + end != size:
        raise StateFileError(f"{path}: the tensors cover {end} bytes of data, the file holds {size - len(raw)}")
    return _Head(raw, tree, spans)


def _read_into_live(f: io.FileIO, path: str, meta: dict, head: _Head, into: Any) -> Any:
    live = _live_targets(head.tree, into)
    targets = {name: live[name] for _, _, name, dtype, shape in head.spans
               if name in live and live[name].dtype == dtype and list(live[name].shape) == shape}
    rest = [span for span in head.spans if span[2] not in targets]
    buffer = _private_buffer(sum(stop - begin for begin, stop, *_ in rest) or 1)
    want = meta.get(DIGEST)
    hasher = _Hasher() if want else None
    tensors: dict[str, torch.Tensor] = {}
    at, written = 0, False
    try:
        if hasher is not None:
            hasher.add(memoryview(head.raw))
        for begin, stop, name, dtype, shape in head.spans:
            nbytes = stop - begin
            if name in targets:
                tensors[name] = targets[name]
                if nbytes:
                    written = True
                    _read_into(f, path, bytes_of(targets[name]), hasher)
            else:
                _read_into(f, path, memoryview(buffer)[at:at + nbytes], hasher)
                tensors[name] = _view(buffer, at, nbytes, dtype, shape)
                at += nbytes
    except (OSError, StateFileError) as error:  # a short read, EIO: what reached the live tensors is unverified
        setattr(error, LIVE_STATE_OVERWRITTEN, written)
        raise
    finally:
        digest = hasher.hexdigest() if hasher is not None else None
    if want and digest != want:
        error = StateFileDigestError(f"{path}: {DIGEST} mismatch (file {digest}, marker {want})")
        setattr(error, LIVE_STATE_OVERWRITTEN, written)
        raise error
    try:
        return _decode(head.tree, tensors)
    except (ValueError, KeyError, TypeError) as e:
        raise StateFileError(f"{path}: the state in its header is damaged ({e})") from e


def _live_targets(tree: Any, into: Any) -> dict[str, torch.Tensor]:
    """Tensor name in the file -> the live tensor at the same place in `into` that can take its
    bytes in place: on the CPU, dense and contiguous (dtype and shape are checked by the caller)."""
    found: dict[str, torch.Tensor] = {}

    def walk(saved: Any, live: Any) -> None:
        if type(saved) is list:
            if isinstance(live, (list, tuple)):  # a shorter or longer live list: its common part
                for a, b in zip(saved, live, strict=False):
                    walk(a, b)
        elif type(saved) is dict:
            if len(saved) == 1 and next(iter(saved)) in _TAGS:
                ((tag, value),) = saved.items()
                if tag == _TENSOR and isinstance(live, torch.Tensor) and live.device.type == "cpu" \
                        and live.is_contiguous() and live.numel() and not live.is_sparse:
                    found.setdefault(value, live)
                elif tag == _TUPLE:
                    walk(value, live)
                elif tag == _ODICT and isinstance(live, dict):
                    for key, item in value["items"]:
                        if isinstance(key, str) and key in live:
                            walk(item, live[key])
                return
            if isinstance(live, dict):
                for key, item in saved.items():
                    if key in live:
                        walk(item, live[key])

    walk(tree, into)
    return found


def _read_safetensors(path: str, buffer: mmap.mmap | bytearray, view: memoryview) -> Any:
    (header_bytes,) = _LENGTH.unpack_from(view, 0)
    data_start = _LENGTH.size + header_bytes
    if header_bytes > MAX_HEADER_BYTES or data_start > len(view):
        raise StateFileError(f"{path}: not a safetensors file, or its header is damaged")
    tree, spans, end = _safetensors_layout(path, view, data_start, len(view))
    if data_start + end != len(view):
        raise StateFileError(f"{path}: the tensors cover {end} bytes of data, the file holds {len(view) - data_start}")
    tensors = {name: _view(buffer, data_start + begin, stop - begin, dtype, shape) for begin, stop, name, dtype, shape in spans}
    try:
        return _decode(tree, tensors)
    except (ValueError, KeyError, TypeError) as e:
        raise StateFileError(f"{path}: the state in its header is damaged ({e})") from e


def _safetensors_layout(path: str, view: memoryview, data_start: int, size: int) -> tuple[Any, list, int]:
    """(the state tree, the tensors' spans in file order, the bytes they cover) of the header in
    view[8:data_start], every span checked to lie where the header says within a file of `size`."""
    try:
        header = json.loads(bytes(view[_LENGTH.size:data_start]).decode())
        metadata = header.pop("__metadata__", None) or {}
        if metadata.get("format") != FORMAT_TAG:
            raise ValueError(f"__metadata__ names format {metadata.get('format')!r}, not {FORMAT_TAG!r}")
        tree = json.loads(metadata["state"])
        spans = []
        for name, info in header.items():
            dtype, shape, offsets = _DTYPES.get(info.get("dtype")), info.get("shape"), info.get("data_offsets")
            if (dtype is None or type(shape) is not list or any(type(n) is not int or n < 0 for n in shape)
                    or type(offsets) is not list or len(offsets) != 2 or any(type(n) is not int for n in offsets)):
                raise ValueError(f"tensor {name!r} has a bad entry: {info}")
            spans.append((offsets[0], offsets[1], name, dtype, shape))
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # json raises ValueError
        raise StateFileError(f"{path}: unreadable header ({e})") from e
    end = 0
    spans.sort(key=lambda span: span[:2])
    # The spec's rule: the tensors' byte ranges, in order, cover the data exactly.
    for begin, stop, name, dtype, shape in spans:
        if begin != end or stop - begin != math.prod(shape) * dtype.itemsize or data_start + stop > size:
            raise StateFileError(f"{path}: tensor {name!r} is not where the header says: {header[name]}")
        end = stop
    return tree, spans, end


def _view(buffer: mmap.mmap | bytearray, at: int, nbytes: int, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    """The tensor at `at` in `buffer`, as a storage of its own over those bytes: a slice of one
    big tensor instead would have a storage offset, which `torch.set_rng_state` does not honour
    (it crashed the process on one; torch 2.13), and `torch.save` of one tensor would write the
    whole buffer. The storage keeps `buffer` alive."""
    if not nbytes:
        return torch.empty(shape, dtype=dtype)  # frombuffer refuses zero bytes
    if at % dtype.itemsize:  # not a file of ours (they keep tensors aligned): a copy of its own
        return torch.frombuffer(buffer, dtype=torch.uint8, count=nbytes, offset=at).clone().view(dtype).view(shape)
    return torch.frombuffer(buffer, dtype=dtype, count=nbytes // dtype.itemsize, offset=at).view(shape)


def _decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of _Encoder.value."""
    if type(obj) is list:
        return [_decode(v, tensors) for v in obj]
    if type(obj) is not dict:
        return obj
    if len(obj) != 1 or next(iter(obj)) not in _TAGS:
        return {k: _decode(v, tensors) for k, v in obj.items()}
    ((tag, value),) = obj.items()
    if tag == _TENSOR:
        return tensors[value]
    if tag == _TUPLE:
        return tuple(_decode(v, tensors) for v in value)
    if tag == _FLOAT:
        return _NON_FINITE[value]
    if tag == _DICT:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in value}
    out = OrderedDict((_decode(k, tensors), _decode(v, tensors)) for k, v in value["items"])
    if "_metadata" in value:
        out._metadata = _decode(value["_metadata"], tensors)  # pyright: ignore[reportAttributeAccessIssue]
    return out
