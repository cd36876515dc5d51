-- pggrant schema version 1: the lock grants table and the schema version.
-- Safe to run more than once. It never drops or resets a fencing_token:
-- each row's counter lives as long as the row, and pggrant never deletes
-- rows (releasing or expiring a grant keeps its token).
CREATE TABLE IF NOT EXISTS fence_grantor_schema (
	singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
	version    integer     NOT NULL,
	issuer     text        NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO fence_grantor_schema (version, issuer)
	VALUES (1, 'pggrant:' || gen_random_uuid()::text)
	ON CONFLICT (singleton) DO NOTHING;

CREATE TABLE IF NOT EXISTS fence_lock_grants (
	name          text        PRIMARY KEY,
	holder        text,
	fencing_token bigint      NOT NULL CHECK (fencing_token > 0),
	granted_at    timestamptz NOT NULL,
	expires_at    timestamptz NOT NULL
);
