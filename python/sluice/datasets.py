"""Packing datasets into tar shards from Python (what `sluice pack` does).

    import sluice
    info = sluice.pack("data/train", "shards/", shard_size="256MB", max_side=512)
    # info: {"samples", "skipped", "resized", "bytes", "shards": [...], "index", "manifest"}

The input is an image folder, a .csv/.tsv file list, or a spec (.yaml; its
source, ${VARS} bound from `vars` and then the environment). See
docs/datasets.md for the layout; read the result with a spec whose source is
`{format: tar_shards, path: shards/}`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Union

from . import _sluice

PathLike = Union[str, "os.PathLike[str]"]


def pack(
    spec_or_source: PathLike,
    out_dir: PathLike,
    shard_size: Union[str, int] = "256MB",
    max_side: Optional[int] = None,
    quality: int = 90,
    threads: Optional[int] = None,
    vars: Optional[Mapping[str, str]] = None,
    restart_markers: bool = True,
) -> Dict[str, Any]:
    """Writes WebDataset tar shards, index.sluice and manifest.json into out_dir
    (new or empty). shard_size: bytes or a string such as "256MB"; max_side:
    re-encode images larger than this on their longer side (JPEG at `quality`);
    restart_markers: store baseline JPEGs re-encoded losslessly with restart
    markers, which the loader decodes faster under a crop (False: byte for
    byte; docs/datasets.md); threads: default every core. Returns a summary dict. Raises a
    sluice.SluiceError subclass on failure: SpecError for a spec input's
    mistakes (each with its file:line:col in e.diagnostics, as sluice.compile
    raises them), InvalidArgumentError, NotFoundError, ..."""
    from . import _vars_dict  # late: datasets.py is imported by the package itself

    return _sluice.pack(
        os.fspath(spec_or_source),
        os.fspath(out_dir),
        str(shard_size),
        int(max_side or 0),
        int(quality),
        bool(restart_markers),
        int(threads or 0),
        _vars_dict(vars),
    )
