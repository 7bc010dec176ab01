CREATE TABLE jobs (
    id {{.ID}},
    workflow TEXT NOT NULL,
    definition {{.JSON}} NOT NULL,
    site TEXT NOT NULL,
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    queue TEXT NOT NULL,
    discovery TEXT,
    fields {{.JSON}},
    paths {{.JSON}},
    include {{.JSON}},
    exclude {{.JSON}},
    ignore_site_includes BOOLEAN NOT NULL DEFAULT FALSE,
    ignore_site_excludes BOOLEAN NOT NULL DEFAULT FALSE,
    state TEXT NOT NULL,
    has_failures BOOLEAN NOT NULL DEFAULT FALSE,
    created {{.TS}} NOT NULL,
    started {{.TS}},
    completed {{.TS}},
    updated {{.TS}} NOT NULL,
    owner_type TEXT NOT NULL,
    owner_id BIGINT,
    owner_name TEXT NOT NULL DEFAULT '',
    clientkey_id BIGINT,
    clientkey_name TEXT NOT NULL DEFAULT '',
    schedule_id BIGINT,
    schedule_name TEXT NOT NULL DEFAULT '',
    dir_walk_complete BOOLEAN NOT NULL DEFAULT FALSE,
    is_settings_job BOOLEAN NOT NULL DEFAULT FALSE,
    friendly_name TEXT NOT NULL DEFAULT '',
    numfiles BIGINT NOT NULL DEFAULT 0,
    numprocessedfiles BIGINT NOT NULL DEFAULT 0,
    numfailedfiles BIGINT NOT NULL DEFAULT 0,
    numskippedfiles BIGINT NOT NULL DEFAULT 0,
    numabortedfiles BIGINT NOT NULL DEFAULT 0,
    numcancelledfiles BIGINT NOT NULL DEFAULT 0,
    progress DOUBLE PRECISION NOT NULL DEFAULT 0,
    run INTEGER NOT NULL DEFAULT 1,
    leftover {{.JSON}}
);
--bun:split
CREATE INDEX jobs_state ON jobs (state);
--bun:split
CREATE INDEX jobs_site_created ON jobs (site_id, created);
--bun:split
CREATE TABLE tasks (
    id {{.ID}},
    job_id BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    site TEXT NOT NULL,
    queue TEXT NOT NULL,
    tasktype TEXT NOT NULL,
    task_id TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    run INTEGER NOT NULL DEFAULT 1,
    batch INTEGER NOT NULL DEFAULT 0,
    step INTEGER NOT NULL DEFAULT 0,
    numpaths BIGINT NOT NULL DEFAULT 0,
    created {{.TS}} NOT NULL,
    started {{.TS}},
    completed {{.TS}},
    result {{.JSON}},
    friendly_name TEXT NOT NULL DEFAULT ''
);
--bun:split
CREATE INDEX tasks_job ON tasks (job_id, state);
--bun:split
CREATE TABLE job_stats (
    id {{.ID}},
    job_id BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    task_id BIGINT,
    path TEXT NOT NULL,
    state TEXT NOT NULL,
    code TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    updated {{.TS}} NOT NULL,
    UNIQUE (job_id, path)
);
--bun:split
CREATE INDEX job_stats_state ON job_stats (job_id, state);
--bun:split
CREATE TABLE job_stat_history (
    id {{.ID}},
    job_id BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    task_id BIGINT,
    path TEXT NOT NULL,
    state TEXT NOT NULL,
    code TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    created {{.TS}} NOT NULL
);
--bun:split
CREATE INDEX job_stat_history_path ON job_stat_history (job_id, path);
