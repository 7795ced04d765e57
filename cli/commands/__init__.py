"""The commands, one module per group; ``cli.main`` finds every click command
defined here. Each is one call into the library and a rendering.
"""

__all__: list[str] = []
