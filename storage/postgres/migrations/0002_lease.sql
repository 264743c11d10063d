-- Version 2: the sequencer lease and fencing (the package doc's "Several
-- writers"). A version-1 database keeps its data: the log is at epoch 0,
-- and the lease has never been taken.

-- tree_head.epoch is the epoch of the lease under which the log may grow.
-- Commit's first statement is "UPDATE tree_head SET size = end WHERE
-- size = start AND epoch = <the store's epoch>"; taking the lease bumps it
-- in the same transaction that bumps lease.epoch, so a former holder's
-- commit updates no row.
ALTER TABLE tree_head ADD COLUMN epoch bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0);

-- lease is the sequencer lease, one row. epoch 0 with an empty holder:
-- never taken. expires_at is set from the database's clock (now() + TTL)
-- and compared with it only, never with an instance's clock.
CREATE TABLE lease (
	singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
	holder     text        NOT NULL,
	address    text        NOT NULL,
	epoch      bigint      NOT NULL CHECK (epoch >= 0),
	expires_at timestamptz NOT NULL
);
INSERT INTO lease (holder, address, epoch, expires_at) VALUES ('', '', 0, '2000-01-01 00:00:00+00');
