"""MultiWorldBench's trajectories home: two-player schedules, the game rules and shared geometry (``world``), and
the ``multiworldbench-engine`` suite (``suite``)."""
