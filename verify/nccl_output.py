"""nccl-tests output (all_reduce_perf and friends), parsed by its own header.

The format, from NVIDIA/nccl-tests src/util.cu (writeResultHeader / writeResultFooter): a header
line naming the columns `size count type redop root` then an out-of-place block `time algbw busbw
#wrong` and an in-place block with the same names; one row per message size; a footer
`# Out of bounds values : N OK|FAILED` and `# Avg bus bandwidth : X`. Launchers prefix lines:
mpirun --tag-output writes `[1,0]<stdout>:`, srun writes `0: `. Columns are located by name, so
the per-iteration variant (-I, extra i_* columns) and timestamps (-S) parse the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `[1,0]<stdout>:` (mpirun --tag-output) or `0: ` (srun --label), before the text nccl-tests prints.
PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
AVG_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")


class NcclOutputError(ValueError):
    pass


@dataclass(frozen=True)
class Row:
    size_bytes: int
    out_of_place_busbw: float
    in_place_busbw: float
    wrong: int
    """Values the test found wrong (both blocks; "N/A" counts as 0)."""


@dataclass(frozen=True)
class NcclResult:
    rows: tuple[Row, ...]
    avg_busbw: float | None
    out_of_bounds: int | None

    def row_at(self, size_bytes: int) -> Row | None:
        return next((r for r in self.rows if r.size_bytes == size_bytes), None)

    @property
    def wrong_values(self) -> int:
        return sum(r.wrong for r in self.rows) + (self.out_of_bounds or 0)


def parse(text: str) -> NcclResult:
    columns: list[str] | None = None
    rows: dict[int, Row] = {}
    avg = oob = None
    for raw in text.splitlines():
        line = PREFIX.sub("", raw, count=1)
        tokens = line.lstrip("#").split()
        if line.lstrip().startswith("#") and tokens[:5] == ["size", "count", "type", "redop", "root"]:
            columns = tokens
            continue
        if m := AVG_BUSBW.search(line):
            avg = float(m.group(1))
            continue
        if m := OUT_OF_BOUNDS.search(line):
            oob = int(m.group(1))
            continue
        if columns is None or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        if len(fields) < len(columns) or not fields[0].isdigit():
            continue  # NCCL INFO lines, warnings, the "..." of an elided excerpt
        busbw = [i for i, c in enumerate(columns) if c == "busbw"]
        wrong = [i for i, c in enumerate(columns) if c == "#wrong"]
        if len(busbw) != 2:
            raise NcclOutputError(f"header has {len(busbw)} busbw columns, expected 2: {' '.join(columns)}")
        try:
            row = Row(
                size_bytes=int(fields[0]),
                out_of_place_busbw=float(fields[busbw[0]]),
                in_place_busbw=float(fields[busbw[1]]),
                wrong=sum(int(fields[i]) for i in wrong if fields[i].isdigit()),
            )
        except (ValueError, IndexError) as e:
            raise NcclOutputError(f"unreadable result row: {line.strip()!r}") from e
        rows[row.size_bytes] = row  # several ranks may print the same row; they agree
    if columns is None:
        raise NcclOutputError("no nccl-tests result header (`#  size  count  type  redop  root ...`) in the output")
    if not rows:
        raise NcclOutputError("the nccl-tests header is there but no result row follows it")
    return NcclResult(tuple(sorted(rows.values(), key=lambda r: r.size_bytes)), avg, oob)
