CREATE TABLE searches (
    id {{.ID}},
    owner_id BIGINT,
    path TEXT NOT NULL,
    recursive BOOLEAN NOT NULL,
    filters {{.JSON}} NOT NULL,
    metadata_fields {{.JSON}} NOT NULL,
    max_results BIGINT NOT NULL,
    state VARCHAR(32) NOT NULL,
    total BIGINT NOT NULL DEFAULT 0,
    truncated BOOLEAN NOT NULL DEFAULT FALSE,
    created_at {{.TS}} NOT NULL,
    finished_at {{.TS}}
);
--bun:split
CREATE INDEX searches_created ON searches (created_at);
--bun:split
CREATE TABLE search_sites (
    id {{.ID}},
    search_id BIGINT NOT NULL REFERENCES searches (id) ON DELETE CASCADE,
    site VARCHAR(255) NOT NULL,
    status VARCHAR(32) NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    results BIGINT NOT NULL DEFAULT 0,
    index_scanned {{.TS}},
    updated_at {{.TS}} NOT NULL,
    UNIQUE (search_id, site)
);
--bun:split
CREATE TABLE search_results (
    id {{.ID}},
    search_id BIGINT NOT NULL REFERENCES searches (id) ON DELETE CASCADE,
    site VARCHAR(255) NOT NULL,
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    type VARCHAR(16) NOT NULL,
    size BIGINT NOT NULL,
    mtime {{.TS}} NOT NULL,
    atime {{.TS}} NOT NULL,
    ctime {{.TS}} NOT NULL,
    state VARCHAR(16) NOT NULL,
    metadata {{.JSON}},
    UNIQUE (search_id, site, path)
);
--bun:split
CREATE INDEX search_results_name ON search_results (search_id, name);
--bun:split
CREATE TABLE metadata_fields (
    id {{.ID}},
    name VARCHAR(64) NOT NULL UNIQUE,
    created_at {{.TS}} NOT NULL
);
