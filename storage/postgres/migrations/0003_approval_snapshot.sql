-- Version 3: the ledger's approval snapshot (ledger.SnapshotStore): the
-- approval lifecycle's state as the entries [0, size) leave it, so that
-- opening a ledger reads it and the entries after it instead of the whole
-- log. One row; data carries its own checksum and the tree's root at size
-- (ledger/snapshot.go), which the ledger checks before using it.
CREATE TABLE approval_snapshot (
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	size      bigint  NOT NULL CHECK (size >= 0),
	data      bytea   NOT NULL
);
