-- Version 1: one log per database (or per schema, chosen with the URL's
-- search_path). Indices and sizes are bigint: a log never reaches 2^63.

-- tree_head is the tree size, one row. Commit updates it first, with
-- "WHERE size = <batch start>": the row lock serializes commits and the
-- condition refuses a batch that does not continue the log.
CREATE TABLE tree_head (
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	size      bigint  NOT NULL CHECK (size >= 0)
);
INSERT INTO tree_head (size) VALUES (0);

-- entries holds each entry's bytes, its RFC 6962 leaf hash (the leaf-hash
-- index is entries_leaf_hash) and its idempotency key, NULL for none. The
-- UNIQUE constraint makes a key stored twice impossible: a batch repeating
-- a stored key fails as a whole.
CREATE TABLE entries (
	idx       bigint PRIMARY KEY CHECK (idx >= 0),
	leaf_hash bytea  NOT NULL CHECK (length(leaf_hash) = 32),
	idem_key  bytea  CONSTRAINT entries_idem_key_unique UNIQUE CHECK (length(idem_key) > 0),
	data      bytea  NOT NULL
);
CREATE INDEX entries_leaf_hash ON entries (leaf_hash, idx);

-- tiles holds the latest version of each tile (C2SP tlog-tiles).
CREATE TABLE tiles (
	level  smallint NOT NULL CHECK (level >= 0 AND level < 256),
	idx    bigint   NOT NULL CHECK (idx >= 0),
	hashes bytea    NOT NULL CHECK (length(hashes) BETWEEN 32 AND 8192 AND length(hashes) % 32 = 0),
	PRIMARY KEY (level, idx)
);

-- checkpoints holds every signed checkpoint by tree size; the latest is
-- the one for the largest size.
CREATE TABLE checkpoints (
	size   bigint PRIMARY KEY CHECK (size >= 0),
	signed bytea  NOT NULL CHECK (length(signed) > 0)
);
