"""The commands, one module per group; ``cli.main`` finds every click command
defined here. Each is one call into the library and a rendering.
"""

from ledger import lazy_exports

__all__ = []

__getattr__, __dir__ = lazy_exports(
    __name__,
    {},
)
