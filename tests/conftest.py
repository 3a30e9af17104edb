import sys
from pathlib import Path

# shared test helpers (the adapter conformance mixin) live beside the tests
sys.path.insert(0, str(Path(__file__).resolve().parent))
