"""One run and its write path: ``Ledger``, the recorder, the lock, creation, repair."""
