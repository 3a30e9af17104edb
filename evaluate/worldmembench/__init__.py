"""WorldMemBench's evaluate home: static memory (``static.py``), dynamic memory (``dynamic.py``), camera following
and general quality (``camera.py``), declared with their thresholds in ``benchmark.py``."""
