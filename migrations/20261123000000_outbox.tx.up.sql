CREATE TABLE outbox (
    id {{.ID}},
    kind TEXT NOT NULL,
    ref_id BIGINT NOT NULL DEFAULT 0,
    payload TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    created {{.TS}} NOT NULL,
    updated {{.TS}} NOT NULL,
    next_attempt {{.TS}} NOT NULL
);
--bun:split
CREATE INDEX outbox_due ON outbox (state, next_attempt);
