CREATE TABLE schedules (
    id {{.ID}},
    name TEXT NOT NULL UNIQUE,
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    space_id BIGINT REFERENCES spaces (id) ON DELETE SET NULL,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    minute TEXT NOT NULL DEFAULT '0',
    hour TEXT NOT NULL DEFAULT '0',
    day_of_month TEXT NOT NULL DEFAULT '*',
    day_of_week TEXT NOT NULL DEFAULT '*',
    month_of_year TEXT NOT NULL DEFAULT '*',
    discovery TEXT NOT NULL DEFAULT 'recursive',
    discovery_options {{.JSON}},
    managed_paths {{.JSON}},
    created_at {{.TS}} NOT NULL,
    updated_at {{.TS}} NOT NULL
);
--bun:split
CREATE INDEX schedules_site ON schedules (site_id);
--bun:split
CREATE TABLE schedule_workflows (
    id {{.ID}},
    schedule_id BIGINT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    workflow TEXT NOT NULL,
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    queue TEXT NOT NULL,
    fields {{.JSON}}
);
--bun:split
CREATE INDEX schedule_workflows_schedule ON schedule_workflows (schedule_id);
--bun:split
CREATE TABLE policies (
    id {{.ID}},
    name TEXT NOT NULL UNIQUE,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    policy_type TEXT NOT NULL,
    filesystem TEXT NOT NULL DEFAULT '',
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    spaces {{.JSON}},
    threads INTEGER NOT NULL DEFAULT 0,
    order_by TEXT NOT NULL DEFAULT 'atime',
    order_reverse BOOLEAN NOT NULL DEFAULT FALSE,
    schedule {{.JSON}},
    triggers {{.JSON}},
    condition_groups {{.JSON}},
    created_at {{.TS}} NOT NULL
);
--bun:split
ALTER TABLE jobs ADD COLUMN policy_id BIGINT;
