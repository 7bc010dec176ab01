package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// NFSShare exports (part of) a space over NFS to the hosts of its clients.
type NFSShare struct {
	bun.BaseModel `bun:"table:nfs_shares,alias:nfs"`

	ID        int64       `bun:"id,pk,autoincrement"`
	UUID      string      `bun:"uuid"`
	Name      string      `bun:"name"`
	Path      string      `bun:"path"`
	SpaceID   int64       `bun:"space_id"`
	CreatedAt time.Time   `bun:"created_at"`
	Clients   []NFSClient `bun:"rel:has-many,join:id=nfs_share_id"`
}

// NFSClient is one export rule of an NFS share: the hosts and options.
type NFSClient struct {
	bun.BaseModel `bun:"table:nfs_share_clients,alias:nfc"`

	ID               int64          `bun:"id,pk,autoincrement"`
	UUID             string         `bun:"uuid"`
	NFSShareID       int64          `bun:"nfs_share_id"`
	Hosts            string         `bun:"hosts"`
	AdvancedSettings map[string]any `bun:"advanced_settings,type:jsonb"`
	OnSites          map[string]any `bun:"on_sites,type:jsonb"`
	AnonymousGroupID *int64         `bun:"anonymous_group_id"`
	AnonymousUserID  *int64         `bun:"anonymous_user_id"`
	FSID             *int64         `bun:"fsid"`
	Asynchronous     bool           `bun:"asynchronous"`
	ForceAllUserID   bool           `bun:"force_all_user_id"`
	ForceRootUserID  bool           `bun:"force_root_user_id"`
	InsecurePorts    bool           `bun:"insecure_ports"`
	ReadOnly         bool           `bun:"read_only"`
	SubtreeCheck     bool           `bun:"subtree_check"`
	WriteDelay       bool           `bun:"write_delay"`
}

// SMBShare exports (part of) a space over SMB.
type SMBShare struct {
	bun.BaseModel `bun:"table:smb_shares,alias:smb"`

	ID                 int64          `bun:"id,pk,autoincrement"`
	UUID               string         `bun:"uuid"`
	Name               string         `bun:"name"`
	SpaceID            int64          `bun:"space_id"`
	Path               string         `bun:"path"`
	ReadOnly           bool           `bun:"read_only"`
	Visible            bool           `bun:"visible"`
	GuestOK            bool           `bun:"guest_ok"`
	HSMSupport         bool           `bun:"hsm_support"`
	MultiThreadReads   bool           `bun:"multi_thread_reads"`
	MultiThreadWrites  bool           `bun:"multi_thread_writes"`
	RootShareLocking   bool           `bun:"root_share_locking"`
	CreateMask         string         `bun:"create_mask"`
	DirectoryMask      string         `bun:"directory_mask"`
	ForceCreateMode    string         `bun:"force_create_mode"`
	ForceDirectoryMode string         `bun:"force_directory_mode"`
	AdminUsers         map[string]any `bun:"admin_users,type:jsonb"`
	AllowedUsers       map[string]any `bun:"allowed_users,type:jsonb"`
	HostsAllow         map[string]any `bun:"hosts_allow,type:jsonb"`
	HostsDeny          map[string]any `bun:"hosts_deny,type:jsonb"`
	AdvancedSettings   map[string]any `bun:"advanced_settings,type:jsonb"`
	OnSites            map[string]any `bun:"on_sites,type:jsonb"`
	CreatedAt          time.Time      `bun:"created_at"`
}

func withClients(q *bun.SelectQuery) *bun.SelectQuery {
	return q.Relation("Clients", func(q *bun.SelectQuery) *bun.SelectQuery { return q.Order("nfc.id") })
}

// NFSShares returns the NFS shares, of one space when spaceID is non-nil.
func NFSShares(ctx context.Context, db bun.IDB, spaceID *int64) ([]NFSShare, error) {
	var out []NFSShare
	q := withClients(db.NewSelect().Model(&out)).Order("nfs.id")
	if spaceID != nil {
		q = q.Where("nfs.space_id = ?", *spaceID)
	}
	return out, dbErr(q.Scan(ctx))
}

// GetNFSShare loads an NFS share with its clients.
func GetNFSShare(ctx context.Context, db bun.IDB, id int64) (*NFSShare, error) {
	s := new(NFSShare)
	err := withClients(db.NewSelect().Model(s)).Where("nfs.id = ?", id).Scan(ctx)
	return s, dbErr(err)
}

// SaveNFSShare inserts or updates s. When clients is non-nil it replaces
// the share's clients: a client with the id of an existing client of this
// share updates it (keeping id and uuid), one without an id is added, and
// existing clients not listed are removed.
func SaveNFSShare(ctx context.Context, db bun.IDB, s *NFSShare, clients []NFSClient) error {
	return runInTx(ctx, db, func(ctx context.Context, tx bun.IDB) error {
		if s.ID == 0 {
			s.UUID, s.CreatedAt = NewUUID(), time.Now().UTC()
			if _, err := tx.NewInsert().Model(s).Exec(ctx); err != nil {
				return dbErr(err)
			}
		} else if _, err := tx.NewUpdate().Model(s).WherePK().ExcludeColumn("uuid", "created_at").Exec(ctx); err != nil {
			return dbErr(err)
		}
		if clients == nil {
			return nil
		}
		var keep []int64
		for i := range clients {
			c := &clients[i]
			c.NFSShareID = s.ID
			if c.ID != 0 {
				res, err := tx.NewUpdate().Model(c).Where("id = ? AND nfs_share_id = ?", c.ID, s.ID).
					ExcludeColumn("id", "uuid").Exec(ctx)
				if err := deleted(res, err); err != nil {
					return err
				}
			} else {
				c.UUID = NewUUID()
				if _, err := tx.NewInsert().Model(c).Exec(ctx); err != nil {
					return dbErr(err)
				}
			}
			keep = append(keep, c.ID)
		}
		q := tx.NewDelete().Model((*NFSClient)(nil)).Where("nfs_share_id = ?", s.ID)
		if len(keep) > 0 {
			q = q.Where("id NOT IN (?)", bun.In(keep))
		}
		_, err := q.Exec(ctx)
		return dbErr(err)
	})
}

// DeleteNFSShare removes a share and its clients.
func DeleteNFSShare(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*NFSShare)(nil)).Where("id = ?", id).Exec(ctx)
	return deleted(res, err)
}

// SMBShares returns the SMB shares, of one space when spaceID is non-nil.
func SMBShares(ctx context.Context, db bun.IDB, spaceID *int64) ([]SMBShare, error) {
	var out []SMBShare
	q := db.NewSelect().Model(&out).Order("smb.id")
	if spaceID != nil {
		q = q.Where("smb.space_id = ?", *spaceID)
	}
	return out, dbErr(q.Scan(ctx))
}

// GetSMBShare loads an SMB share.
func GetSMBShare(ctx context.Context, db bun.IDB, id int64) (*SMBShare, error) {
	s := new(SMBShare)
	err := db.NewSelect().Model(s).Where("smb.id = ?", id).Scan(ctx)
	return s, dbErr(err)
}

// SaveSMBShare inserts or updates s.
func SaveSMBShare(ctx context.Context, db bun.IDB, s *SMBShare) error {
	if s.ID == 0 {
		s.UUID, s.CreatedAt = NewUUID(), time.Now().UTC()
		_, err := db.NewInsert().Model(s).Exec(ctx)
		return dbErr(err)
	}
	_, err := db.NewUpdate().Model(s).WherePK().ExcludeColumn("uuid", "created_at").Exec(ctx)
	return dbErr(err)
}

// DeleteSMBShare removes a share.
func DeleteSMBShare(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*SMBShare)(nil)).Where("id = ?", id).Exec(ctx)
	return deleted(res, err)
}
