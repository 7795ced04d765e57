"""Configuration identity (identity.md): what a run's results depend on, the
manifest, drift between two identities, and where a key belongs.
"""

from ledger.lazy import lazy_exports

__all__ = [
    "Drift",
    "RunManifest",
    "config_identity",
    "diff_keys",
    "identity_digest",
    "server_blocks",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Drift": "ledger.identity.drift",
        "RunManifest": "ledger.identity.manifest",
        "config_identity": "ledger.identity.digest",
        "diff_keys": "ledger.identity.drift",
        "identity_digest": "ledger.identity.digest",
        "server_blocks": "ledger.identity.servers",
    },
)
