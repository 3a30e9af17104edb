"""Scale-out with accelerate: ``accelerate launch [--num_processes N] -m worldgate generate|evaluate ...``.

Each process takes the cases (or records) ``i`` with ``i % world == rank`` — a fixed split, so no case is done twice
or lost — and writes into the one shared run folder (records are renamed into place whole, feature cache entries
likewise). ``evaluate`` then meets at a barrier and rank 0 scores every record from the shared feature cache and
writes the single ``results.json``. Multi-node runs use accelerate's own config; nothing here is node-specific.
Without a launcher (``WORLD_SIZE`` unset) everything runs in one process as before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def rank_world() -> tuple[int, int]:
    """This process's rank and the number of processes (torchrun/accelerate set ``RANK`` and ``WORLD_SIZE``)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
    except ValueError:
        return 0, 1
    if world < 1 or not 0 <= rank < world:
        raise RuntimeError(f"inconsistent launcher environment RANK={rank} WORLD_SIZE={world}")
    return rank, world


_STATE = None


def barrier(tag: str, folder: Path, timeout_s: float = 24 * 3600) -> None:
    """Wait until every process reaches this point. Uses accelerate's ``wait_for_everyone`` (torch.distributed) when
    accelerate is installed, else marker files in ``folder`` (any shared file system)."""
    global _STATE
    rank, world = rank_world()
    if world == 1:
        return
    try:
        from accelerate import PartialState
    except ImportError:
        PartialState = None
    if PartialState is not None:
        if _STATE is None:
            _STATE = PartialState()
        _STATE.wait_for_everyone()
        return
    d = Path(folder) / ".barrier" / tag
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{rank}").write_text(str(os.getpid()))
    t0 = time.time()
    while len(list(d.iterdir())) < world:
        if time.time() - t0 > timeout_s:
            raise TimeoutError(f"barrier {tag!r}: only {len(list(d.iterdir()))} of {world} processes arrived")
        time.sleep(0.2)
