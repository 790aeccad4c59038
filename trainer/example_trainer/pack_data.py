"""Pack a synthetic classification data set into binary shards.

python -m example_trainer.pack_data [--hparams FILE] [DATA_DIR]   (default: $TRAIN_DATA_DIR)

--hparams takes the data parameters from a trainer hyperparameters file (its `data` mapping),
so that the trainer, run with that file, accepts the packed directory as it is. A read-only
TRAIN_DATA_DIR (the datasets bucket, mounted through Mountpoint for S3) must be packed this way
beforehand and uploaded (trainer/README.md): the trainer cannot pack it.

Shard format (little endian), file shard-NNNNN.bin:
    64-byte header: magic b"TRSHARD1", uint64 n, uint32 dim, uint32 classes, zero padding
    float32[n, dim] features, then int64[n] labels

Labels come from a fixed random linear "teacher" plus noise, so a small model
can learn them and the loss visibly falls. Every shard is written atomically
(temp file, fsync, rename) and MANIFEST.json is written last: a directory
without a manifest matching the requested parameters is (re)packed. Packing is
deterministic (seeded), so several nodes packing the same shared directory at
once write identical bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys

import torch
from launcher.checkpoint import atomic_write_bytes, atomic_write_json, fsync_dir

from .hparams import DEFAULT_PARAMS, ConfigError, load_hparams

MAGIC = b"TRSHARD1"
HEADER = struct.Struct("<8sQII")
HEADER_BYTES = 64
MANIFEST = "MANIFEST.json"


def shard_name(i: int) -> str:
    return f"shard-{i:05d}.bin"


def _tensor_bytes(t: torch.Tensor) -> bytearray:
    """Raw bytes of a contiguous tensor without numpy."""
    t = t.contiguous()
    buf = bytearray(t.numel() * t.element_size())
    if buf:
        torch.frombuffer(buf, dtype=t.dtype).copy_(t.reshape(-1))
    return buf


def encode_shard(x: torch.Tensor, y: torch.Tensor, classes: int) -> bytes:
    n, dim = x.shape
    header = HEADER.pack(MAGIC, n, dim, classes).ljust(HEADER_BYTES, b"\0")
    return b"".join(
        [header, _tensor_bytes(x.to(torch.float32)), _tensor_bytes(y.to(torch.int64))]
    )


def read_header(f) -> tuple[int, int, int]:
    raw = f.read(HEADER_BYTES)
    if len(raw) < HEADER_BYTES:
        raise ValueError("shard too short for its header")
    magic, n, dim, classes = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise ValueError(f"bad shard magic {magic!r}")
    return n, dim, classes


def shard_size(n: int, dim: int) -> int:
    return HEADER_BYTES + n * dim * 4 + n * 8


def make_data(params: dict) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(int(params["seed"]))
    dim, classes = int(params["dim"]), int(params["classes"])
    teacher = torch.randn(dim, classes, generator=g)
    shards = []
    for _ in range(int(params["shards"])):
        x = torch.randn(int(params["samples_per_shard"]), dim, generator=g)
        logits = x @ teacher + float(params["noise"]) * torch.randn(
            x.shape[0], classes, generator=g
        )
        shards.append((x, logits.argmax(dim=1)))
    return shards




def read_manifest(data_dir: str) -> dict | None:
    try:
        with open(os.path.join(data_dir, MANIFEST)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


PREPACK_HINT = ("pack it once where it can be written and upload it to the datasets bucket: "
                "cd trainer && python -m example_trainer.pack_data --hparams <the job's hyperparameters file> "
                "/tmp/packed && aws s3 sync /tmp/packed s3://$(pulumi stack output datasetsBucket)/")


def _writable(path: str) -> bool:
    """Whether files can be created in `path`, or `path` created in its nearest existing parent."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return os.access(path, os.W_OK | os.X_OK)


def unpackable(data_dir: str, params: dict | None = None) -> str | None:
    """Why `ensure_packed` cannot work: no manifest for these parameters in a read-only
    directory (a dataset mount). None when the data is there or can be packed."""
    params = {**DEFAULT_PARAMS, **(params or {})}
    manifest = read_manifest(data_dir)
    if (manifest is not None and manifest.get("params") == params) or _writable(data_dir):
        return None
    what = "has no MANIFEST.json" if manifest is None else f"has a {MANIFEST} for other data parameters"
    return f"TRAIN_DATA_DIR {data_dir!r} {what} and is read-only, so the data set cannot be packed there: {PREPACK_HINT}"


def ensure_packed(data_dir: str, params: dict | None = None) -> dict:
    """Pack shards into data_dir unless a matching manifest is already there."""
    params = {**DEFAULT_PARAMS, **(params or {})}
    manifest = read_manifest(data_dir)
    if manifest is not None and manifest.get("params") == params:
        return manifest
    os.makedirs(data_dir, exist_ok=True)
    files = []
    for i, (x, y) in enumerate(make_data(params)):
        name = shard_name(i)
        atomic_write_bytes(os.path.join(data_dir, name), encode_shard(x, y, params["classes"]))
        files.append({"name": name, "samples": int(x.shape[0])})
    manifest = {
        "format": "TRSHARD1",
        "params": params,
        "dim": params["dim"],
        "classes": params["classes"],
        "shards": files,
    }
    atomic_write_json(os.path.join(data_dir, MANIFEST), manifest)
    fsync_dir(data_dir)
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m example_trainer.pack_data",
                                     description="Pack the example trainer's data set into binary shards.")
    parser.add_argument("--hparams", metavar="FILE",
                        help="take the data parameters from this trainer hyperparameters file")
    parser.add_argument("data_dir", nargs="?", default=os.environ.get("TRAIN_DATA_DIR", "/workspace/data"))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    params = None
    if args.hparams:
        try:
            params = load_hparams(args.hparams)["data"]
        except ConfigError as e:
            for line in e.errors:
                sys.stderr.write(f"pack_data: error: {line}\n")
            return 2
    manifest = ensure_packed(args.data_dir, params)
    print(json.dumps({"event": "data_packed", "data_dir": args.data_dir, "shards": len(manifest["shards"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
