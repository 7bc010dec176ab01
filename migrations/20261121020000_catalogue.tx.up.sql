CREATE TABLE workflows (
    id {{.ID}},
    name VARCHAR(150) NOT NULL UNIQUE,
    label TEXT NOT NULL,
    discovery TEXT,
    discovery_options {{.JSON}},
    fields {{.JSON}},
    filter_rules {{.JSON}},
    icon_classes {{.JSON}},
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    visible BOOLEAN NOT NULL DEFAULT TRUE,
    schedule_only BOOLEAN NOT NULL DEFAULT FALSE,
    external_only BOOLEAN NOT NULL DEFAULT FALSE,
    preferred_queue TEXT NOT NULL DEFAULT '',
    builtin BOOLEAN NOT NULL DEFAULT FALSE,
    created_at {{.TS}} NOT NULL,
    updated_at {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE features (
    name VARCHAR(100) PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    enabled BOOLEAN NOT NULL DEFAULT FALSE
);
--bun:split
INSERT INTO features (name, description, enabled) VALUES
    ('analytics', 'Storage analytics (GET /api/analytics/) and site file statistics.', TRUE),
    ('file_browser', 'Browsing space files and starting workflows on them from the file browser.', TRUE),
    ('search', 'File search across sites (POST /api/search/).', TRUE),
    ('external_targets', 'Migration of file data to external targets (buckets, file systems).', TRUE),
    ('policies', 'Automated storage policies that start jobs on conditions.', TRUE),
    ('schedules', 'Scheduled workflows (cron-like schedules that start jobs).', TRUE),
    ('site_sync', 'The site_sync workflow step: keeping a folder in step between two sites.', TRUE),
    ('idp_login', 'Signing in with an external OpenID Connect identity provider.', FALSE),
    ('db_backup', 'Scheduled backups of the hub database (see the db_backup_* configuration).', FALSE),
    ('addon', 'The optional site add-on component (Site.addon_enabled).', FALSE);
--bun:split
CREATE TABLE file_status_types (
    key VARCHAR(100) PRIMARY KEY,
    label TEXT NOT NULL DEFAULT '',
    background_color VARCHAR(7) NOT NULL DEFAULT '#ffffff',
    text_color VARCHAR(7) NOT NULL DEFAULT '#000000',
    position INTEGER NOT NULL DEFAULT 0
);
--bun:split
INSERT INTO file_status_types (key, label, background_color, text_color, position) VALUES
    ('resident', 'Resident', '#2e7d32', '#ffffff', 1),
    ('premigrated', 'Premigrated', '#1565c0', '#ffffff', 2),
    ('migrated', 'Migrated', '#6a1b9a', '#ffffff', 3),
    ('recalling', 'Recalling', '#ef6c00', '#ffffff', 4),
    ('unknown', 'Unknown', '#9e9e9e', '#000000', 5);
--bun:split
CREATE TABLE certificate_lifetimes (
    id {{.ID}},
    name VARCHAR(100) NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    days INTEGER NOT NULL,
    updated_at {{.TS}},
    updated_by BIGINT REFERENCES users (id) ON DELETE SET NULL
);
--bun:split
INSERT INTO certificate_lifetimes (name, description, days) VALUES
    ('ca', 'The hub certificate authority that signs site and node certificates.', 3650),
    ('site', 'Client certificates of sites (mTLS between site workers and the hub).', 365),
    ('node', 'Client certificates of individual worker nodes.', 90);
--bun:split
CREATE TABLE tags (
    id {{.ID}},
    name VARCHAR(255) NOT NULL UNIQUE,
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE alerts (
    id {{.ID}},
    name TEXT NOT NULL,
    node TEXT NOT NULL DEFAULT '',
    queue TEXT NOT NULL DEFAULT '',
    severity VARCHAR(20) NOT NULL,
    site TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '',
    suppressed BOOLEAN NOT NULL DEFAULT FALSE,
    timestamp {{.TS}} NOT NULL,
    created {{.TS}} NOT NULL
);
--bun:split
CREATE INDEX alerts_timestamp ON alerts (timestamp);
--bun:split
CREATE TABLE actions (
    id {{.ID}},
    action TEXT NOT NULL,
    state VARCHAR(20) NOT NULL,
    results TEXT NOT NULL DEFAULT '',
    user_id BIGINT REFERENCES users (id) ON DELETE SET NULL,
    created {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE settings (
    id {{.ID}},
    site_id BIGINT REFERENCES sites (id) ON DELETE CASCADE,
    key VARCHAR(255) NOT NULL,
    value {{.JSON}} NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    updated_at {{.TS}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX settings_global_key ON settings (key) WHERE site_id IS NULL;
--bun:split
CREATE UNIQUE INDEX settings_site_key ON settings (site_id, key) WHERE site_id IS NOT NULL;
--bun:split
CREATE TABLE settings_tasks (
    id {{.ID}},
    task_id TEXT NOT NULL DEFAULT '',
    tasktype VARCHAR(50) NOT NULL,
    job_id BIGINT,
    site TEXT NOT NULL,
    started {{.TS}},
    completed {{.TS}},
    state VARCHAR(20) NOT NULL,
    request {{.JSON}},
    results {{.JSON}},
    friendly_name TEXT NOT NULL DEFAULT '',
    created {{.TS}} NOT NULL
);
--bun:split
CREATE INDEX settings_tasks_state ON settings_tasks (state);
