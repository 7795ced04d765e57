"""Credentials (ID-10..ID-15): the one set of credential-shaped patterns,
redaction of configurations and text, and literal credentials in copied values.
"""

from ledger.lazy import lazy_exports

__all__ = [
    "Redactor",
    "credential_paths",
    "redact_secrets",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Redactor": "ledger.identity.secrets.redact",
        "credential_paths": "ledger.identity.secrets.literal",
        "redact_secrets": "ledger.identity.secrets.patterns",
    },
)
