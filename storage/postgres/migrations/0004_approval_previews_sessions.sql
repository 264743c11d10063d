-- Version 4: what ledgerd keeps for approvals beside the log, so that
-- every instance, and the next sequencer after a failover, has it
-- (docs/approvals.md "Where previews and sessions live").

-- approval_previews holds the preview of each open approval, keyed by the
-- approval's id (the SHA-256 entry hash of its needs_approval request):
-- the rendered, redacted, bounded preview's canonical JSON, whose digest
-- the needs_approval answer announced. Written and deleted only by the
-- lease holder (fenced by tree_head's epoch, like Commit); a row is
-- deleted when its approval is consumed, denied or expires.
CREATE TABLE approval_previews (
	approval_id bytea       PRIMARY KEY CHECK (length(approval_id) = 32),
	doc         bytea       NOT NULL,
	stored_at   timestamptz NOT NULL DEFAULT now()
);

-- approver_sessions holds approvers' sign-in sessions, keyed by the
-- SHA-256 of the session token: the token itself is never stored, so a
-- reader of the database cannot take a session over. credential is the
-- SHA-256 of the approver's password hash at sign-in: a session ends
-- when the approver's password changes or the approver is removed.
CREATE TABLE approver_sessions (
	token_sha256 bytea       PRIMARY KEY CHECK (length(token_sha256) = 32),
	approver     text        NOT NULL,
	csrf         text        NOT NULL,
	credential   bytea       NOT NULL CHECK (length(credential) = 32),
	sign_in      timestamptz NOT NULL,
	used_at      timestamptz NOT NULL
);
CREATE INDEX approver_sessions_sign_in ON approver_sessions (sign_in);
