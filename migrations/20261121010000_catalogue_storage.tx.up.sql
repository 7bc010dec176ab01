ALTER TABLE sites ADD COLUMN refreshed_at {{.TS}};
--bun:split
CREATE TABLE spaces (
    id {{.ID}},
    uuid VARCHAR(36) NOT NULL UNIQUE,
    name VARCHAR(150) NOT NULL UNIQUE,
    mountpoint TEXT NOT NULL UNIQUE,
    size BIGINT,
    permission_mode TEXT NOT NULL DEFAULT '',
    color {{.JSON}},
    immutable BOOLEAN NOT NULL DEFAULT FALSE,
    on_sites {{.JSON}},
    created {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE space_sites (
    space_id BIGINT NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    site_id BIGINT NOT NULL REFERENCES sites (id),
    label TEXT NOT NULL DEFAULT '',
    usage {{.JSON}},
    state TEXT NOT NULL DEFAULT 'pending',
    error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (space_id, site_id)
);
--bun:split
CREATE INDEX space_sites_site ON space_sites (site_id);
--bun:split
CREATE TABLE space_snapshot_schedules (
    id {{.ID}},
    space_id BIGINT NOT NULL UNIQUE REFERENCES spaces (id) ON DELETE CASCADE,
    duration TEXT NOT NULL,
    frequency TEXT NOT NULL,
    time TEXT NOT NULL
);
--bun:split
CREATE TABLE nfs_shares (
    id {{.ID}},
    uuid VARCHAR(36) NOT NULL UNIQUE,
    name TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL,
    space_id BIGINT NOT NULL REFERENCES spaces (id),
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE INDEX nfs_shares_space ON nfs_shares (space_id);
--bun:split
CREATE TABLE nfs_share_clients (
    id {{.ID}},
    uuid VARCHAR(36) NOT NULL UNIQUE,
    nfs_share_id BIGINT NOT NULL REFERENCES nfs_shares (id) ON DELETE CASCADE,
    hosts TEXT NOT NULL,
    advanced_settings {{.JSON}},
    on_sites {{.JSON}},
    anonymous_group_id BIGINT,
    anonymous_user_id BIGINT,
    fsid BIGINT,
    asynchronous BOOLEAN NOT NULL DEFAULT FALSE,
    force_all_user_id BOOLEAN NOT NULL DEFAULT FALSE,
    force_root_user_id BOOLEAN NOT NULL DEFAULT FALSE,
    insecure_ports BOOLEAN NOT NULL DEFAULT FALSE,
    read_only BOOLEAN NOT NULL DEFAULT FALSE,
    subtree_check BOOLEAN NOT NULL DEFAULT FALSE,
    write_delay BOOLEAN NOT NULL DEFAULT FALSE
);
--bun:split
CREATE INDEX nfs_share_clients_share ON nfs_share_clients (nfs_share_id);
--bun:split
CREATE TABLE smb_shares (
    id {{.ID}},
    uuid VARCHAR(36) NOT NULL UNIQUE,
    name VARCHAR(150) NOT NULL UNIQUE,
    space_id BIGINT NOT NULL REFERENCES spaces (id),
    path TEXT NOT NULL,
    read_only BOOLEAN NOT NULL,
    visible BOOLEAN NOT NULL,
    guest_ok BOOLEAN NOT NULL DEFAULT FALSE,
    hsm_support BOOLEAN NOT NULL DEFAULT FALSE,
    multi_thread_reads BOOLEAN NOT NULL DEFAULT FALSE,
    multi_thread_writes BOOLEAN NOT NULL DEFAULT FALSE,
    root_share_locking BOOLEAN NOT NULL DEFAULT FALSE,
    create_mask TEXT NOT NULL DEFAULT '',
    directory_mask TEXT NOT NULL DEFAULT '',
    force_create_mode TEXT NOT NULL DEFAULT '',
    force_directory_mode TEXT NOT NULL DEFAULT '',
    admin_users {{.JSON}},
    allowed_users {{.JSON}},
    hosts_allow {{.JSON}},
    hosts_deny {{.JSON}},
    advanced_settings {{.JSON}},
    on_sites {{.JSON}},
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE INDEX smb_shares_space ON smb_shares (space_id);
--bun:split
CREATE TABLE storage_pools (
    id {{.ID}},
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    filesystem TEXT NOT NULL DEFAULT '',
    capacity BIGINT NOT NULL DEFAULT 0,
    free_space BIGINT NOT NULL DEFAULT 0,
    used_space BIGINT NOT NULL DEFAULT 0,
    is_default BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at {{.TS}} NOT NULL,
    UNIQUE (site_id, name)
);
--bun:split
CREATE TABLE servers (
    id {{.ID}},
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    list_of_interfaces {{.JSON}},
    updated_at {{.TS}} NOT NULL,
    UNIQUE (site_id, name)
);
--bun:split
CREATE TABLE datastores (
    id {{.ID}},
    name VARCHAR(150) NOT NULL UNIQUE,
    type TEXT NOT NULL,
    accesskey_enc TEXT NOT NULL DEFAULT '',
    accesskeyid TEXT NOT NULL DEFAULT '',
    secretaccesskey_enc TEXT NOT NULL DEFAULT '',
    bucket TEXT NOT NULL DEFAULT '',
    container TEXT NOT NULL DEFAULT '',
    credentialsfile TEXT NOT NULL DEFAULT '',
    endpoint TEXT NOT NULL DEFAULT '',
    region TEXT NOT NULL DEFAULT '',
    storageaccount TEXT NOT NULL DEFAULT '',
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE ip_addresses (
    id {{.ID}},
    ipaddr VARCHAR(15) NOT NULL,
    datastore_id BIGINT NOT NULL REFERENCES datastores (id) ON DELETE CASCADE,
    UNIQUE (datastore_id, ipaddr)
);
--bun:split
CREATE TABLE buckets (
    id {{.ID}},
    name VARCHAR(150) NOT NULL UNIQUE,
    label TEXT NOT NULL DEFAULT '',
    storage_type TEXT NOT NULL,
    endpoint TEXT NOT NULL DEFAULT '',
    port BIGINT,
    scheme TEXT NOT NULL DEFAULT '',
    region TEXT NOT NULL DEFAULT '',
    ssl_verify BOOLEAN NOT NULL DEFAULT TRUE,
    container TEXT NOT NULL DEFAULT '',
    storage_account TEXT NOT NULL DEFAULT '',
    migration_target_folder TEXT NOT NULL DEFAULT '',
    advanced_settings {{.JSON}},
    credentials_file TEXT NOT NULL DEFAULT '',
    access_key_enc TEXT NOT NULL DEFAULT '',
    access_key_id_enc TEXT NOT NULL DEFAULT '',
    secret_access_key_enc TEXT NOT NULL DEFAULT '',
    credentials_json_enc TEXT NOT NULL DEFAULT '',
    soft_deleting BOOLEAN NOT NULL DEFAULT FALSE,
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE external_targets (
    id {{.ID}},
    name VARCHAR(150) NOT NULL UNIQUE,
    storage_type TEXT NOT NULL,
    local_file_regex TEXT NOT NULL,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    backup_only BOOLEAN NOT NULL DEFAULT FALSE,
    backup_site_id BIGINT REFERENCES sites (id) ON DELETE SET NULL,
    delete_on_recall BOOLEAN NOT NULL DEFAULT FALSE,
    bucket_id BIGINT REFERENCES buckets (id) ON DELETE SET NULL,
    container TEXT NOT NULL DEFAULT '',
    storage_account TEXT NOT NULL DEFAULT '',
    endpoint TEXT NOT NULL DEFAULT '',
    port BIGINT,
    scheme TEXT NOT NULL DEFAULT '',
    region TEXT NOT NULL DEFAULT '',
    ssl_verify BOOLEAN NOT NULL DEFAULT TRUE,
    migration_target_folder TEXT NOT NULL DEFAULT '',
    advanced_settings {{.JSON}},
    access_key_enc TEXT NOT NULL DEFAULT '',
    access_key_id_enc TEXT NOT NULL DEFAULT '',
    secret_access_key_enc TEXT NOT NULL DEFAULT '',
    credentials_json_enc TEXT NOT NULL DEFAULT '',
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE INDEX external_targets_bucket ON external_targets (bucket_id);
--bun:split
CREATE TABLE external_target_sites (
    external_target_id BIGINT NOT NULL REFERENCES external_targets (id) ON DELETE CASCADE,
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    PRIMARY KEY (external_target_id, site_id)
);
