"""WorldMark's evaluate home: the action metrics (direction accuracy and purity, motion stability, response latency,
each split translation/rotation), local, revisit and global memory, and visual quality (``benchmark.py``)."""
