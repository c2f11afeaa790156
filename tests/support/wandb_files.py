"""Reading a W&B offline run file back: its records and the logged history (W&B has no reader for them)."""

from __future__ import annotations

import json
import struct

BLOCK = 32 * 1024


def wandb_records(path):
    """The protobuf records of a .wandb file (W&B's LevelDB-style log: 32 KiB blocks of chunked records)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, chunks = 7, []
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos: pos + 7])
        if kind == 0:  # block padding
            pos += left
            continue
        chunks.append(data[pos + 7: pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(chunks))
            chunks = []
            yield record


def history(records) -> dict[int, dict[str, float]]:
    rows = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
            rows.setdefault(int(row["step"]), {}).update(row)
    return rows
