CREATE TABLE site_answers (
    id {{.ID}},
    kind VARCHAR(32) NOT NULL,
    site VARCHAR(255) NOT NULL,
    path TEXT NOT NULL,
    variant TEXT NOT NULL DEFAULT '',
    computed_at {{.TS}} NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (kind, site, path, variant)
);
--bun:split
CREATE INDEX site_answers_computed ON site_answers (computed_at);
--bun:split
ALTER TABLE job_stats ADD COLUMN size BIGINT;
