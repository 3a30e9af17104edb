"""Experiments over whole runs, above evaluate and generate: metric validation on Engine faults (``validate``),
context policies at one memory budget (``context``), threshold sweeps (``sweep``)."""
