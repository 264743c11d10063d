-- Version 5: the witnesses' cosignatures of the log's checkpoints, kept by
-- the sequencer when a witness answers, so that every instance serves them
-- and a new sequencer starts from them (cosignatures.go). witness is the
-- witness's key ID ("<name>+<key hash in hex>"); line its C2SP
-- tlog-cosignature line, which readers verify before serving it.
CREATE TABLE cosignatures (
	size    bigint NOT NULL CHECK (size >= 0),
	witness text   NOT NULL CHECK (witness <> ''),
	line    bytea  NOT NULL CHECK (length(line) > 0),
	PRIMARY KEY (size, witness)
);
-- Each witness's latest size, and the pruning of its older ones.
CREATE INDEX cosignatures_witness_size ON cosignatures (witness, size);
