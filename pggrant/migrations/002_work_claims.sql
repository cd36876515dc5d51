-- pggrant schema version 2: the work-claims table. Safe to run more than
-- once; never drops or resets a claim_token.
CREATE TABLE IF NOT EXISTS fence_work_claims (
	queue       text        NOT NULL,
	item        text        NOT NULL,
	payload     bytea       NOT NULL,
	enqueued_at timestamptz NOT NULL DEFAULT now(),
	claim_token bigint      NOT NULL DEFAULT 0 CHECK (claim_token >= 0),
	claimed_by  text,
	expires_at  timestamptz,
	deliveries  integer     NOT NULL DEFAULT 0,
	state       text        NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'done', 'dead')),
	PRIMARY KEY (queue, item)
);
CREATE INDEX IF NOT EXISTS fence_work_claims_ready
	ON fence_work_claims (queue, enqueued_at, item) WHERE state = 'ready';
UPDATE fence_grantor_schema SET version = 2, updated_at = now() WHERE version < 2;
