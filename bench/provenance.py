"""A results picture names the table it was drawn from.

Every picture that the benchmark reports draw (report_decoding.py, report_backward.py,
plot_bench.py, plot_cpu_bench.py) carries, in a PNG text chunk named "Source", the file name and
the SHA-256 of the CSV whose rows it plots: "decoding_<date>_<gpu>.csv sha256:<64 hex digits>".
bench/check-results-pictures (ctest bench.results_pictures) recomputes the digest of every
recorded picture's CSV, so that a picture copied from another run, or a table edited after its
picture was drawn, cannot pass for the run's own: the plot and the table a reader compares come
from the same rows.

Only the standard library: the check reads the chunks without matplotlib.
"""
import hashlib
import os
import struct
import zlib

KEY = "Source"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe(csv_path):
    """The Source text of a picture drawn from csv_path: its file name and its digest."""
    return f"{os.path.basename(csv_path)} sha256:{sha256_of(csv_path)}"


def parse(source):
    """(csv file name, hex digest) from a Source text; None if it is not one."""
    name, sep, digest = source.rpartition(" sha256:")
    if not sep or not name or len(digest) != 64:
        return None
    return name, digest


def among(path, paths):
    """Whether path is one of paths (as files: "./x.csv" is "x.csv"). A report drawn again from a
    recorded run reads the CSV it would write, and leaves it as it is."""
    return any(os.path.abspath(p) == os.path.abspath(path) for p in paths)


def savefig(fig, path, csv_path, **kwargs):
    """fig.savefig(path, **kwargs) with the Source chunk naming csv_path, which must be written
    (complete) before the picture is; csv_path None (a picture of several raw tables, which
    bench/results/ never holds) saves it without one."""
    metadata = {KEY: describe(csv_path)} if csv_path else None
    fig.savefig(path, metadata=metadata, **kwargs)


def mismatch(png_path, csv_path):
    """None when the picture names csv_path (its file name) with the file's current digest; else
    what it names instead, for a test's message."""
    named = parse(text_chunks(png_path).get(KEY, ""))
    own = (os.path.basename(csv_path), sha256_of(csv_path))
    return None if named == own else f"{png_path} names {named}, not its table {own}"


def text_chunks(png_path):
    """The text chunks (tEXt, zTXt, iTXt) of a PNG file as a dict; ValueError if it is no PNG."""
    with open(png_path, "rb") as f:
        data = f.read()
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError(f"{png_path} is not a PNG file")
    chunks, at = {}, len(PNG_SIGNATURE)
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        at += 12 + length  # length, type, data, CRC
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            chunks[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            chunks[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _language, _, rest = rest.partition(b"\0")
            _translated, _, text = rest.partition(b"\0")
            chunks[key.decode("latin-1")] = (zlib.decompress(text) if compressed else text).decode("utf-8")
        elif kind == b"IEND":
            break
    return chunks
