"""Files written all or nothing: a temporary file in the same folder, flushed to disk, then
renamed over the target, so a reader sees the old file or the new one and never a part."""

from __future__ import annotations

import os
import tempfile


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Writes `data` to `path` atomically (the folder must exist)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".nngraph-", suffix=os.path.splitext(path)[1], dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
