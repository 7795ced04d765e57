"""JSON that is safe inside an HTML ``<script>`` element, whatever it holds.

A ``<script>`` element's text ends at the first ``</script`` and ``<!--`` can
switch the HTML parser into a state where the page's next ``</script>`` no
longer ends it, so a failure class or an approval reason holding
``<!--<script>`` would stop the page's own script. ``script_json`` escapes every
``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e`` and ``\\u0026``: they occur
only inside JSON strings, where the escape means the same character, so
``JSON.parse`` gives back the very value. U+2028 and U+2029 are escaped too,
for a page that reads the block as JavaScript rather than JSON.
"""

from __future__ import annotations

import msgspec

__all__ = ["script_json"]

#: Each character that could end or confuse a ``<script>`` element, escaped.
_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
_ENCODER = msgspec.json.Encoder()


def script_json(value: object) -> str:
    """``value`` as JSON text with no raw ``<``, ``>``, ``&``, U+2028 or U+2029."""
    return _ENCODER.encode(value).decode().translate(_ESCAPES)
