"""worldgate: a model-adapter gateway, rollout generator and evaluator for interactive video world models.

Python API (docs/python-api.md): ``worldgate.generate(...)``, ``worldgate.evaluate(...)``,
``worldgate.load_results(...)`` and ``worldgate.load_samples(...)``, the functions of :mod:`worldgate.api`.
``import worldgate`` stays cheap: the API's modules are imported when a function is first called or looked up.
``worldgate.generate`` and ``worldgate.evaluate`` are also the subpackages of those names (``worldgate.generate.runner``
keeps working): calling the package calls the API function.
"""

from __future__ import annotations

import importlib
import types

__version__ = "0.1.0"

#: API name -> "module:function", resolved on first use (a lazy registry, as the models' is)
API = {
    "generate": "worldgate.api:generate",
    "evaluate": "worldgate.api:evaluate",
    "load_results": "worldgate.api:load_results",
    "load_samples": "worldgate.api:load_samples",
}


def _api(name: str):
    module, attr = API[name].split(":")
    return getattr(importlib.import_module(module), attr)


class CallablePackage(types.ModuleType):
    """A subpackage (``worldgate.generate``, ``worldgate.evaluate``) that is also the API function of its name."""

    def __call__(self, *args, **kwargs):
        return _api(self.__name__.rpartition(".")[2])(*args, **kwargs)


# the two subpackages' __init__ files import nothing: making them callable costs nothing at `import worldgate`
for _name in ("generate", "evaluate"):
    importlib.import_module(f"{__name__}.{_name}").__class__ = CallablePackage
del _name


def __getattr__(name: str):
    if name in API:
        return _api(name)
    raise AttributeError(f"module 'worldgate' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(API))


__all__ = ["API", "CallablePackage", "__version__", "evaluate", "generate", "load_results", "load_samples"]
