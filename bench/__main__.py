"""Entry point of ``python -m bench``.

Kept free of imports: every measuring child (``spawn``) re-imports this module,
and must import only what its own measurement needs.
"""

import sys

if __name__ == "__main__":
    from bench.harness import main

    sys.exit(main())
