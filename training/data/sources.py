"""What `prepare` reads: finding the input files, opening them (compressed too), and reading rows.

Files come from paths, directories (recursive) and globs. In directories and globs a file is text
when its suffix is in --extensions or it has none (LICENSE, COPYING, debian/copyright; a dot in a
license or version name, as in Apache-2.0, is no suffix), also behind a compression suffix
(.txt.gz, .jsonl.zst); json/jsonl/csv/parquet files are structured. Hidden files and folders and
the output directory itself are never read. Every file left out is named in a warning with its
reason, every time, and counted by the filter that removed it, so an empty result can say why.

Structured rows are read here, not by `datasets`, so that a row whose text column holds something
other than a string, or a line that does not parse, is skipped with a warning naming the file and
the line, instead of being turned into the text "123" or "None" or failing the whole corpus.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import glob
import gzip
import io
import json
import lzma
import re
import sys
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from training.data.prepare_lock import LOCK
from trainstack.contract.errors import UserError
from trainstack.contract.log import warn
from trainstack.contract.paths import check_usable, kind_of

STRUCTURED_FORMATS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
CHUNK_CHARS = 1 << 20  # text files are read in ~1 MB pieces cut at line ends


def _zstd_open(path, mode):
    import zstandard

    return zstandard.open(path, mode)


COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": _zstd_open}


def _decompression_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError, EOFError, lzma.LZMAError, zlib.error]  # zlib: corrupt .gz data
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def compression(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return suffix if suffix in COMPRESSIONS else None


# What a file-type suffix looks like: letters, digits, underscores, at least one letter. The dot in a
# license or version name is not one: Apache-2.0, MPL-2.0, GPL-3.0-or-later, COPYING.v2 hold plain text.
_EXTENSION = re.compile(r"(?!\.v\d+$)\.\w*[^\W\d_]\w*", re.IGNORECASE)


def inner_suffix(path: Path) -> str:
    """The suffix that says what the content is: .txt for a.txt.gz, '' for LICENSE, LICENSE.gz or MPL-2.0."""
    name = path.name[: -len(path.suffix)] if compression(path) else path.name
    suffix = Path(name).suffix.lower()
    return suffix if _EXTENSION.fullmatch(suffix) else ""


def open_binary(path: Path):
    opener = COMPRESSIONS.get(compression(path) or "")
    return opener(path, "rb") if opener else open(path, "rb")  # noqa: SIM115 - the caller closes it


def open_text(path: Path, encoding: str, newline: str | None = None):
    return io.TextIOWrapper(open_binary(path), encoding=encoding, newline=newline)


# ---------------------------------------------------------------- finding files
@dataclass
class Sources:
    text: list[Path] = field(default_factory=list)
    structured: dict[str, list[Path]] = field(default_factory=dict)
    left_out: Counter = field(default_factory=Counter)  # filter -> how many files it removed
    explicit: set[Path] = field(default_factory=set)  # named on the command line
    # filter -> the files (or hidden folders) it removed while discovering, named in one warning each
    passed_over: dict[str, list[Path]] = field(default_factory=dict)

    def files(self) -> list[Path]:
        return [*self.text, *(p for files in self.structured.values() for p in files)]

    def skip(self, reason: str, path: Path) -> None:
        self.left_out[reason] += 1
        self.passed_over.setdefault(reason, []).append(path)

    def warn_passed_over(self, shown: int = 50) -> None:
        """Every file left out while discovering, by name and reason (one warning per reason)."""
        for reason, paths in self.passed_over.items():
            unique = list(dict.fromkeys(paths))
            names = ", ".join(map(str, unique[:shown])) + (f" and {len(unique) - shown} more" if len(unique) > shown else "")
            warn(f"skipping {len(paths)} file(s) {reason}: {names}")

    def why_empty(self) -> str:
        if not self.left_out:
            return "no files"
        return ", ".join(f"{n} {reason}" for reason, n in sorted(self.left_out.items(), key=lambda r: (-r[1], r[0])))


def discover(sources: list[str], text_suffixes: set[str], out: Path) -> Sources:
    """Expand files, directories and globs into text files and structured files per format."""
    found = Sources()
    out = out.resolve()

    def add(path: Path, explicit: bool, root: Path | None = None) -> None:
        if out == path.resolve() or out in path.resolve().parents:
            if path.resolve() != out / LOCK:  # prepare's own lock is not the user's file
                found.skip("inside --out", path)
            return
        parts = path.relative_to(root).parts if root is not None else ()
        hidden = next((i for i, part in enumerate(parts) if part.startswith(".")), None)
        if hidden is not None:
            found.skip("hidden", root.joinpath(*parts[: hidden + 1]))  # the hidden folder, named once
            return
        kind = inner_suffix(path)
        if kind in STRUCTURED_FORMATS and not (kind == ".parquet" and compression(path)):
            found.structured.setdefault(STRUCTURED_FORMATS[kind], []).append(path)
        elif explicit or kind in text_suffixes or kind == "":
            found.text.append(path)
            if explicit:
                found.explicit.add(path)
        else:
            found.skip(f"without a suffix from --extensions ({','.join(sorted(text_suffixes))})", path)

    for src in sources:
        if any(ch in src for ch in "*?["):
            matches = sorted(Path(m) for m in glob.glob(src, recursive=True) if Path(m).is_file())
            if not matches:
                raise UserError(f"--data {src}: no files match this pattern; check the path (quote globs)")
            for m in matches:
                add(m, explicit=False)
        elif Path(src).is_dir():
            for p in sorted(Path(src).rglob("*")):
                if p.is_file():
                    add(p, explicit=False, root=Path(src))
                elif not p.is_dir():  # FIFOs, devices, sockets, links to nothing
                    found.skip("that are not regular files (FIFOs, devices, sockets, dangling links)", p)
        elif Path(src).is_file():
            add(Path(src), explicit=True)
        elif kind_of(Path(src)):
            raise UserError(f"--data {src} is {kind_of(Path(src))}, not a file: prepare reads its input twice "
                            "(checking, then tokenizing); save the text to a file and pass that")
        else:
            check_usable(Path(src), "--data")
            raise UserError(f"--data {src} does not exist; pass text files, directories or globs")
    found.text = list(dict.fromkeys(found.text))
    found.structured = {k: list(dict.fromkeys(v)) for k, v in found.structured.items()}
    return found


def keep_readable_text(found: Sources, encoding: str) -> None:
    """Drop text files that are empty, binary, not `encoding`, unreadable or badly compressed; each is
    named in a warning with its reason."""
    kept = []
    for path in found.text:
        problem = text_problem(path, encoding)
        if problem is None:
            kept.append(path)
            continue
        reason, detail = problem
        found.left_out[reason] += 1
        warn(f"skipping {path}: {detail or 'no text in it (' + reason + ')'}")
    found.text = kept


def text_problem(path: Path, encoding: str) -> tuple[str, str | None] | None:
    """None for a non-empty text file in `encoding`, else (filter, detail for a warning)."""
    try:
        with open_binary(path) as f:
            head = f.read(8192)
            if b"\x00" in head:
                return "binary", "binary file"
            decoder = codecs.getincrementaldecoder(encoding)()
            offset, data, seen_text = 0, head, False
            while data:
                try:
                    seen_text = seen_text or bool(decoder.decode(data).strip())
                except UnicodeDecodeError as exc:
                    return (f"not {encoding}", f"not valid {encoding} at byte {offset + exc.start}; convert it to "
                            "UTF-8 or pass --encoding")
                offset += len(data)
                data = f.read(1 << 20)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return f"not {encoding}", f"ends in the middle of a {encoding} character"
    except _decompression_errors() as exc:
        if compression(path) and getattr(exc, "errno", None) is None:  # errno: the file; none: its content
            return "damaged archives", f"not a valid {compression(path)} file ({str(exc) or type(exc).__name__})"
        return "unreadable", f"unreadable ({getattr(exc, 'strerror', None) or exc})"
    return None if seen_text else ("empty", None)


def text_file_pieces(files: list[str], encoding: str, stamp: str):
    """Rows of (text, end): each file in newline-aligned pieces, `end` on its last piece.

    Pieces keep memory flat for multi-GB files and give the tokenizer processes work to share even
    for a single file; `end` marks where the end-of-text token goes. `stamp` (sizes and mtimes of
    the inputs) is unused here: it is part of the datasets cache key, so changed files are re-read.
    """
    for name in files:
        with open_text(Path(name), encoding) as f:
            pending = ""
            while block := f.read(CHUNK_CHARS):
                pending += block
                cut = pending.rfind("\n") + 1
                if cut == 0 and len(pending) < 4 * CHUNK_CHARS:
                    continue  # no line end yet: read on (a file of one huge line is cut anyway)
                cut = cut or len(pending)
                yield {"text": pending[:cut], "end": False}
                pending = pending[cut:]
            yield {"text": pending, "end": True}


# ---------------------------------------------------------------- structured rows
def peek_columns(path: Path, fmt: str) -> list[str] | None:
    """Column names from a structured file's header, without loading it (None when not cheap to tell)."""
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        with open_text(path, "utf-8") as f:
            first = f.readline()
        if fmt == "csv":
            return next(csv.reader([first]), [])
        record = json.loads(first)  # JSON Lines; a pretty-printed or array JSON file is checked while reading
        return list(record) if isinstance(record, dict) else None
    except (ValueError, ImportError, *_decompression_errors()):
        return None


class _Skips:
    """Rows left out of one file, reported as one warning per reason with the first line numbers."""

    def __init__(self, path: Path, unit: str):
        self.path = path
        self.unit = unit  # line, item (of a JSON array) or row (of a parquet file)
        self.lines: dict[str, list[int]] = {}

    def add(self, reason: str, line: int) -> None:
        self.lines.setdefault(reason, []).append(line)

    def report(self) -> None:
        for reason, lines in self.lines.items():
            shown = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
            warn(f"skipping {len(lines)} row(s) of {self.path} {reason} ({self.unit} {shown})")


def structured_texts(files: dict[str, list[str]], column: str, stamp: str):
    """Rows of (text, end=True) from structured files; `stamp` is part of the datasets cache key only."""
    readers = {"json": _json_values, "csv": _csv_values, "parquet": _parquet_values}
    for fmt, names in files.items():
        for name in names:
            path = Path(name)
            skips = _Skips(path, "row" if fmt == "parquet" else "line")
            strings = 0
            for line, value in readers[fmt](path, column, skips):
                if isinstance(value, str):
                    strings += 1
                    if value.strip():
                        yield {"text": value, "end": True}
                else:
                    skips.add(f"whose '{column}' is {_json_kind(value)}, not text", line)
            skips.report()
            if not strings and skips.lines:
                raise UserError(f"{path} has no text in column '{column}' (see the warnings above); pick the text "
                                "column with --text-column or fix the file")


def _json_kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {int: "a number", float: "a number", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _json_values(path: Path, column: str, skips: _Skips):
    with open_text(path, "utf-8") as f:
        start = f.read(4096).lstrip()[:1]
        f.seek(0)
        if start == "[":  # one JSON array of records
            try:
                records = enumerate(json.load(f), 1)
            except ValueError as exc:
                raise UserError(f"{path} is not valid JSON ({exc}); fix the file or write it as JSON Lines") from exc
            skips.unit = "item"
        else:  # JSON Lines
            records = _json_lines(f, skips)
        for number, record in records:
            if not isinstance(record, dict):
                skips.add("that are not JSON objects", number)
            elif column not in record:
                skips.add(f"without a '{column}' field", number)
            else:
                yield number, record[column]


def _json_lines(f, skips: _Skips):
    number = 0
    try:
        for number, line in enumerate(f, 1):  # noqa: B007 - number is reported after a decoding error
            if line.strip():
                try:
                    yield number, json.loads(line)
                except ValueError:
                    skips.add("that are not valid JSON", number)
    except UnicodeDecodeError:
        skips.add("that are not valid UTF-8 (the rest of the file is skipped too)", number + 1)


def _csv_values(path: Path, column: str, skips: _Skips):
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # whole documents in one field are the point
    with open_text(path, "utf-8", newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
            if header is None or column not in header:
                return
            index = header.index(column)
            for row in reader:
                if len(row) != len(header):
                    skips.add(f"whose number of fields differs from the header's {len(header)}", reader.line_num)
                else:
                    yield reader.line_num, row[index]
        except (csv.Error, UnicodeDecodeError) as exc:
            reason = "that are not valid UTF-8" if isinstance(exc, UnicodeDecodeError) else f"that break the CSV format ({exc})"
            skips.add(f"{reason}; the rest of the file is skipped too", reader.line_num + 1)


def _parquet_values(path: Path, column: str, skips: _Skips):
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    if column not in file.schema_arrow.names:
        return
    kind = file.schema_arrow.field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise UserError(f"column '{column}' of {path} holds {kind}, not text; pick the text column with --text-column")
    row = 0
    for batch in file.iter_batches(columns=[column]):
        for value in batch.column(0).to_pylist():
            row += 1
            yield row, value
