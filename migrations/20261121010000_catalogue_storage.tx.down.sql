DROP TABLE external_target_sites;
--bun:split
DROP TABLE external_targets;
--bun:split
DROP TABLE buckets;
--bun:split
DROP TABLE ip_addresses;
--bun:split
DROP TABLE datastores;
--bun:split
DROP TABLE servers;
--bun:split
DROP TABLE storage_pools;
--bun:split
DROP TABLE smb_shares;
--bun:split
DROP TABLE nfs_share_clients;
--bun:split
DROP TABLE nfs_shares;
--bun:split
DROP TABLE space_snapshot_schedules;
--bun:split
DROP TABLE space_sites;
--bun:split
DROP TABLE spaces;
--bun:split
ALTER TABLE sites DROP COLUMN refreshed_at;
