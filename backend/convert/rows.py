"""A spreadsheet's first sheet as a stream of rows, parsed in the confined converter child (issue 54 imports).

Staging converts a whole file into one `Converted` (bounded to 100,000 rows a sheet); an import needs every
row of a million-row file without holding them. So the same parsers (CSV reader, XLSX `_SheetReader`, ODS
`_parse_ods`) run in the same sandbox (`isolated.spawn_confined`: bubblewrap, the converter user, seccomp,
RLIMIT_AS/CPU), but their sheet builder writes the rows to stdout as they are read, a batch of rows a JSON line:

    {"header": [...], "kind": "csv"}              the first non-empty row
    [[row_number, [cell, ...]], ...]              data rows (row_number: the sheet's 1-based row), as many as
                                                  fit BATCH_BYTES a line (one row alone may be longer)
    {"end": rows} | {"error": "..."}              the last line

A line a batch, not a row: reading a million one-row lines cost the importing process a quarter of its time.
The parent (`stream_rows`) reads the lines as they come, so its memory holds one batch, never the file's rows;
it caps the rows it accepts, each line's length (a row longer than 4 MiB is refused), and the wall-clock time,
and kills the child's process group past any of them.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from backend.convert.model import MAX_COLUMNS, ConversionFailed, ConvertLimits, Deadline, cell_text, describe

if TYPE_CHECKING:
    from backend.convert.sheets import CellBudget, SheetBuilder

READ_CHUNK = 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024  # one row's JSON; a longer line is a hostile file
# the child writes a line when its rows reach this much JSON (a row longer than that goes alone)
BATCH_BYTES = 64 * 1024
CHILD_MEMORY_BYTES = 2 * 1024**3


class ImportFileRefused(Exception):
    """The file cannot be read as rows; the message is shown to the person importing it."""


@dataclass(frozen=True)
class RowLimits:
    max_rows: int = 2_000_000
    max_input_bytes: int = 512 * 1024 * 1024
    time_limit_seconds: float = 600.0


class _Emitter:
    """The sheet builder's interface (`add_row`, `add_cells`, `add_formula`), writing rows instead of keeping
    them. Row numbers are the sheet's own (1-based), so a refusal names the row a person sees."""

    def __init__(self, out: IO[str], kind: str, max_rows: int) -> None:
        self.out = out
        self.kind = kind
        self.max_rows = max_rows
        self.header: list[str] | None = None
        self.rows = 0
        self.truncated = False
        self.last_row = -1
        self.batch: list[str] = []  # the rows' JSON not written yet
        self.batch_bytes = 0

    def add_row(self, index: int, values: list[str]) -> None:
        while values and values[-1] == "":
            values.pop()
        if not values:
            return
        values = values[:MAX_COLUMNS]
        if self.header is None:
            self.header = values
            self.out.write(json.dumps({"header": values, "kind": self.kind}, ensure_ascii=False) + "\n")
            return
        if self.rows >= self.max_rows:
            raise ConversionFailed(f"The file has more than {self.max_rows:,} rows, the import limit.")
        self.rows += 1
        row = json.dumps([index + 1, values], ensure_ascii=False)
        if self.batch and self.batch_bytes + len(row) > BATCH_BYTES:
            self.flush()  # so a line of several rows stays small, and a long row goes alone
        self.batch.append(row)
        self.batch_bytes += len(row) + 1

    def flush(self) -> None:
        """The rows kept so far, as one line."""
        if self.batch:
            self.out.write("[" + ",".join(self.batch) + "]\n")
            self.batch, self.batch_bytes = [], 0

    def add_cells(self, index: int, cells: dict[int, str]) -> None:
        if not cells:
            return
        width = min(max(cells) + 1, MAX_COLUMNS)
        values = [""] * width
        for column, text in cells.items():
            if column < width:
                values[column] = text
        self.add_row(index, values)

    def add_formula(self, index: int, column: int, formula: str) -> None:
        """An import reads the cached values; formulas are not rows."""


class _Budget:
    """`CellBudget` for the ODS parser: the row limit bounds an import, not a cell count."""

    exhausted = False

    def take(self, n: int) -> bool:
        return True


def emit_rows(data: bytes, filename: str, limits: RowLimits, out: IO[str]) -> None:
    """In the child: the first sheet of `data` as JSON lines on `out` (see the module doc)."""
    from backend.convert.sheets import sniff_delimiter
    from backend.convert.sniff import sniff_kind
    from backend.convert.text import decode_text

    deadline = Deadline(limits.time_limit_seconds)
    made: list[_Emitter] = []

    def emitter(kind: str) -> _Emitter:
        made.append(_Emitter(out, kind, limits.max_rows))
        return made[-1]

    try:
        kind = sniff_kind(data, filename)
        if kind == "xlsx":
            _xlsx_rows(data, limits, deadline, emitter)
        elif kind == "ods":
            _ods_rows(data, limits, deadline, emitter)
        elif kind in ("pdf", "image"):
            raise ConversionFailed("Only CSV, Excel (.xlsx) and OpenDocument (.ods) files can be imported.")
        else:
            text, _encoding = decode_text(data)
            del data  # the caller keeps no reference: the bytes go, the text stays
            sheet = emitter("csv")
            reader = csv.reader(_lines(text), delimiter=sniff_delimiter(text))
            for index, row in enumerate(reader):
                if index % 4096 == 0:
                    deadline.check()
                sheet.add_row(index, [cell_text(v) for v in row])
        for done in made:
            done.flush()
        out.write(json.dumps({"end": True, "peak_rss_kib": _peak_rss_kib()}) + "\n")
    except ConversionFailed as exc:
        out.write(json.dumps({"error": str(exc)}) + "\n")
    except csv.Error as exc:
        out.write(json.dumps({"error": f"The CSV file cannot be parsed ({describe(exc)})."}) + "\n")
    except MemoryError:
        out.write(json.dumps({"error": "The file needs too much memory to read."}) + "\n")
    except Exception as exc:  # a damaged file, whatever the parser raised: said, never a crash of the import
        out.write(json.dumps({"error": f"The file cannot be read ({type(exc).__name__}: {str(exc)[:200]})."}))
        out.write("\n")
    out.flush()


def _peak_rss_kib() -> int:
    """This process's peak resident memory (VmHWM), for the bench: the child's own, whatever namespaces hide."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _lines(text: str) -> Iterator[str]:
    """The text's lines with their endings, one at a time: `io.StringIO(text)` would copy the whole text again
    (as UCS-4: four times a 100 MB ASCII file). The csv reader joins the lines of a quoted multi-line cell."""
    end = "\n" if "\n" in text or "\r" not in text else "\r"  # old Mac files end lines with a lone CR
    start, size = 0, len(text)
    while start < size:
        stop = text.find(end, start)
        stop = size if stop < 0 else stop + 1
        yield text[start:stop]
        start = stop


def _convert_limits(limits: RowLimits) -> ConvertLimits:
    return ConvertLimits(
        max_input_bytes=limits.max_input_bytes,
        max_rows_per_sheet=limits.max_rows,
        max_cells=limits.max_rows * 64,
        time_limit_seconds=limits.time_limit_seconds,
        max_unzipped_bytes=2 * 1024**3,
    )


def _xlsx_rows(
    data: bytes, limits: RowLimits, deadline: Deadline, emitter: Callable[[str], _Emitter]
) -> None:
    import posixpath

    from backend.convert import xlsx
    from backend.convert.sheets import open_zip_checked

    archive = open_zip_checked(data, _convert_limits(limits), "Excel workbook")
    workbook_path = xlsx._office_document(archive)
    sheets, epoch_1904 = xlsx._workbook_sheets(archive, workbook_path, [])
    base = posixpath.dirname(workbook_path)
    rels = xlsx._relationships(archive, xlsx._rels_path(workbook_path))
    shared = xlsx._shared_strings(archive, base, rels, deadline)
    dates, durations = xlsx._date_styles(archive, base, rels, [])
    for name, _state, rel_id in sheets:
        rel = rel_id and rels.get(rel_id)
        if not rel or not rel[0].endswith(xlsx.REL_WORKSHEET):
            continue
        # _Emitter is the builder's interface by duck typing (add_row, add_cells, add_formula)
        builder = cast("SheetBuilder", emitter("xlsx"))
        reader = xlsx._SheetReader(builder, shared, dates, durations, epoch_1904, deadline, name)
        with archive.open(xlsx._resolve(base, rel[1])) as stream:
            reader.feed_all(stream)
        return
    raise ConversionFailed("The workbook has no worksheet with cells.")


def _ods_rows(data: bytes, limits: RowLimits, deadline: Deadline, emitter: Callable[[str], _Emitter]) -> None:
    from backend.convert import sheets

    archive = sheets.open_zip_checked(data, _convert_limits(limits), "OpenDocument spreadsheet")
    if "content.xml" not in archive.namelist():
        raise ConversionFailed("The OpenDocument spreadsheet is damaged: it has no content.xml.")
    with archive.open("content.xml") as prolog:
        sheets._refuse_doctype(prolog, deadline)

    def builder(_limits: ConvertLimits, _budget: CellBudget) -> _Emitter:
        return emitter("ods")

    with archive.open("content.xml") as stream:
        for _sheet in sheets._parse_ods(
            # _Budget is CellBudget's interface by duck typing (exhausted, take)
            stream,
            _convert_limits(limits),
            cast("CellBudget", _Budget()),
            deadline,
            [],
            make_builder=builder,
        ):
            return  # the first sheet only


# --- parent side -----------------------------------------------------------------------------------------


@dataclass
class RowStream:
    """What `stream_rows` found: the header and file kind (the rows are iterated from `rows()`)."""

    header: list[str]
    kind: str
    rows: Generator[tuple[int, list[str]], None, None]  # a generator: closing it ends the child
    stats: dict[str, int] = field(default_factory=dict)  # filled at the end: the child's peak_rss_kib


def stream_rows(
    path: Path, filename: str, limits: RowLimits | None = None, *, bwrap: bool = True
) -> RowStream:
    """The first sheet of the file at `path`, parsed in the confined child, as (row number, cells) pairs.

    ImportFileRefused for a file that cannot be read (said in the child's words), a file past the limits
    (rows, bytes, time), a converter that dies. The child is killed when the iteration ends early."""
    from backend.convert import isolated

    limits = limits or RowLimits()
    size = path.stat().st_size
    if size == 0:
        raise ImportFileRefused("The file is empty.")
    if size > limits.max_input_bytes:
        raise ImportFileRefused(
            f"The file is {size / 2**20:,.0f} MiB, over the {limits.max_input_bytes / 2**20:,.0f} MiB import limit."
        )
    scratch = Path(tempfile.mkdtemp(prefix="cleanroom-import-"))
    try:
        process = isolated.spawn_confined(
            [sys.executable, "-m", "backend.convert.rows"], scratch, bwrap=bwrap
        )
    except isolated.ConverterUnavailable as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise ImportFileRefused(f"File conversion is turned off on this server ({exc}).") from exc
    header_line = json.dumps(
        {"filename": filename, "limits": limits.__dict__, "memory": CHILD_MEMORY_BYTES}
    ).encode()
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        isolated._kill_group(process)

    timer = threading.Timer(limits.time_limit_seconds + isolated.GRACE_SECONDS, kill)
    timer.daemon = True
    timer.start()

    def feed() -> None:
        try:
            assert process.stdin
            process.stdin.write(header_line + b"\n")
            with path.open("rb") as fh:
                while chunk := fh.read(READ_CHUNK):
                    process.stdin.write(chunk)
            process.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()

    def cleanup() -> None:
        timer.cancel()
        if process.poll() is None:
            isolated._kill_group(process)
            process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            assert pipe is not None  # spawn_confined opens all three as pipes
            with contextlib.suppress(OSError, ValueError):
                pipe.close()
        shutil.rmtree(scratch, ignore_errors=True)

    def lines() -> Iterator[object]:
        assert process.stdout
        while True:
            line = process.stdout.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            if len(line) > MAX_LINE_BYTES:
                raise ImportFileRefused("A row of the file is larger than 4 MiB; the import was stopped.")
            yield json.loads(line)
        process.wait()
        if timed_out.is_set():
            raise ImportFileRefused(
                f"Reading the file took longer than the {limits.time_limit_seconds:g} s limit."
            )
        raise ImportFileRefused(
            "The file needs too much memory to read."
            if process.returncode in (-9, 137)
            else f"The converter stopped unexpectedly (exit {process.returncode})."
        )

    source = lines()
    try:
        first = next(source)
    except StopIteration:  # pragma: no cover - lines() always raises at its end
        cleanup()
        raise ImportFileRefused("The converter said nothing.") from None
    except BaseException:
        cleanup()
        raise
    if isinstance(first, dict) and "error" in first:
        cleanup()
        raise ImportFileRefused(str(first["error"]))
    if isinstance(first, dict) and first.get("end"):
        cleanup()
        raise ImportFileRefused("The file has no rows (not even a header).")
    if not (isinstance(first, dict) and isinstance(first.get("header"), list)):
        cleanup()
        raise ImportFileRefused("The converter answered something unexpected.")

    def rows() -> Generator[tuple[int, list[str]], None, None]:
        try:
            for item in source:
                if isinstance(item, list):
                    for number, cells in item:
                        yield int(number), [str(v) for v in cells]
                elif isinstance(item, dict) and "error" in item:
                    raise ImportFileRefused(str(item["error"]))
                elif isinstance(item, dict) and item.get("end"):
                    stream.stats["peak_rss_kib"] = int(item.get("peak_rss_kib") or 0)
                    return
        finally:
            cleanup()

    stream = RowStream(header=[str(h) for h in first["header"]], kind=str(first.get("kind", "")), rows=rows())
    return stream


def main() -> None:
    from backend.convert import isolated, service, sheets, sniff, text, xlsx  # noqa: F401 - loaded before the drop

    stdin = sys.stdin.buffer
    header = json.loads(stdin.readline())
    limits = RowLimits(**header["limits"])
    isolated.enter_confinement(
        int(header.get("memory") or CHILD_MEMORY_BYTES), isolated.cpu_seconds(limits.time_limit_seconds)
    )
    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", write_through=False)
    emit_rows(stdin.read(limits.max_input_bytes + 1), header["filename"], limits, out)  # no other reference


if __name__ == "__main__":
    main()
