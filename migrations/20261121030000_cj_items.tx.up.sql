CREATE TABLE cj_items (
    id {{.ID}},
    site TEXT NOT NULL,
    type TEXT NOT NULL,
    scope TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL,
    etag TEXT NOT NULL,
    generation BIGINT NOT NULL DEFAULT 1,
    status TEXT NOT NULL,
    deleted BOOLEAN NOT NULL DEFAULT FALSE,
    comment TEXT NOT NULL DEFAULT '',
    extras {{.JSON}} NOT NULL,
    data {{.JSON}} NOT NULL,
    log {{.JSON}} NOT NULL,
    created_at {{.TS}} NOT NULL,
    modified_at {{.TS}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX cj_items_name ON cj_items (site, type, scope, name);
--bun:split
CREATE INDEX cj_items_list ON cj_items (site, type, deleted, id);
