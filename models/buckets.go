package models

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/workflows/vocab"
)

// ErrSoftDeleting means the bucket is being deleted and cannot change.
var ErrSoftDeleting = errors.New("bucket is being deleted")

// TargetSecrets are the sealed credentials of a bucket or an external
// target (columns *_enc, sealed with the hub's Cipher; "" when unset).
type TargetSecrets struct {
	AccessKeyEnc       string `bun:"access_key_enc"`
	AccessKeyIDEnc     string `bun:"access_key_id_enc"`
	SecretAccessKeyEnc string `bun:"secret_access_key_enc"`
	CredentialsJSONEnc string `bun:"credentials_json_enc"`
}

// SecretFields lists the secret fields of buckets and external targets.
var SecretFields = []string{vocab.SecretAccessKey, vocab.SecretAccessKeyID, vocab.SecretSecretAccessKey, vocab.SecretCredentialsJSON}

// Field returns the sealed value of a secret field.
func (s *TargetSecrets) Field(name string) *string {
	switch name {
	case vocab.SecretAccessKey:
		return &s.AccessKeyEnc
	case vocab.SecretAccessKeyID:
		return &s.AccessKeyIDEnc
	case vocab.SecretSecretAccessKey:
		return &s.SecretAccessKeyEnc
	case vocab.SecretCredentialsJSON:
		return &s.CredentialsJSONEnc
	}
	panic("unknown secret field " + name)
}

// Open decrypts every secret of a row of table.
func (s *TargetSecrets) Open(c *vocab.Cipher, table string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range SecretFields {
		v, err := c.Open(vocab.SecretColumn(table, f), *s.Field(f))
		if err != nil {
			return nil, err
		}
		out[f] = v
	}
	return out, nil
}

// TargetLocation are the connection fields buckets and targets share.
type TargetLocation struct {
	Endpoint              string         `bun:"endpoint"`
	Port                  *int64         `bun:"port"`
	Scheme                string         `bun:"scheme"`
	Region                string         `bun:"region"`
	SSLVerify             bool           `bun:"ssl_verify"`
	Container             string         `bun:"container"`
	StorageAccount        string         `bun:"storage_account"`
	MigrationTargetFolder string         `bun:"migration_target_folder"`
	AdvancedSettings      map[string]any `bun:"advanced_settings,type:jsonb"`
}

// Bucket is a storage location on an external system (an S3 bucket, an
// Azure container, a folder) that external targets point into.
type Bucket struct {
	bun.BaseModel `bun:"table:buckets,alias:b"`

	ID              int64  `bun:"id,pk,autoincrement"`
	Name            string `bun:"name"`
	Label           string `bun:"label"`
	StorageType     string `bun:"storage_type"`
	CredentialsFile string `bun:"credentials_file"`
	TargetLocation
	TargetSecrets
	SoftDeleting bool      `bun:"soft_deleting"`
	CreatedAt    time.Time `bun:"created_at"`

	Targets []ExternalTarget `bun:"rel:has-many,join:id=bucket_id"`
}

// ExternalTarget is a migration target: where files matching
// LocalFileRegex go, on the sites it is available on.
type ExternalTarget struct {
	bun.BaseModel `bun:"table:external_targets,alias:et"`

	ID             int64   `bun:"id,pk,autoincrement"`
	Name           string  `bun:"name"`
	StorageType    string  `bun:"storage_type"`
	LocalFileRegex string  `bun:"local_file_regex"`
	Enabled        bool    `bun:"enabled"`
	BackupOnly     bool    `bun:"backup_only"`
	BackupSiteID   *int64  `bun:"backup_site_id"`
	DeleteOnRecall bool    `bun:"delete_on_recall"`
	BucketID       *int64  `bun:"bucket_id"`
	Bucket         *Bucket `bun:"rel:belongs-to,join:bucket_id=id"`
	TargetLocation
	TargetSecrets
	CreatedAt time.Time `bun:"created_at"`

	Sites []Site `bun:"m2m:external_target_sites,join:ExternalTarget=Site"`
}

// ExternalTargetSite makes a target available on a site.
type ExternalTargetSite struct {
	bun.BaseModel `bun:"table:external_target_sites"`

	ExternalTargetID int64           `bun:"external_target_id,pk"`
	ExternalTarget   *ExternalTarget `bun:"rel:belongs-to,join:external_target_id=id"`
	SiteID           int64           `bun:"site_id,pk"`
	Site             *Site           `bun:"rel:belongs-to,join:site_id=id"`
}

func bucketRelations(q *bun.SelectQuery) *bun.SelectQuery {
	return q.Relation("Targets", func(q *bun.SelectQuery) *bun.SelectQuery { return q.Column("id", "bucket_id").Order("et.id") })
}

// BucketsQuery selects buckets with their target ids, by name.
func BucketsQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return bucketRelations(db.NewSelect().Model(dest)).Order("b.name")
}

// GetBucket loads one bucket with its target ids.
func GetBucket(ctx context.Context, db bun.IDB, id int64) (*Bucket, error) {
	b := new(Bucket)
	return b, dbErr(bucketRelations(db.NewSelect().Model(b)).Where("b.id = ?", id).Scan(ctx))
}

// FindBucket loads a bucket by id ("12") or name.
func FindBucket(ctx context.Context, db bun.IDB, ref string) (*Bucket, error) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		if b, err := GetBucket(ctx, db, id); err == nil || !errors.Is(err, ErrNotFound) {
			return b, err
		}
	}
	b := new(Bucket)
	return b, dbErr(bucketRelations(db.NewSelect().Model(b)).Where("b.name = ?", ref).Scan(ctx))
}

// SaveBucket inserts or updates b; a bucket being deleted is ErrSoftDeleting.
func SaveBucket(ctx context.Context, db bun.IDB, b *Bucket) error {
	if b.ID == 0 {
		b.CreatedAt = time.Now().UTC()
		_, err := db.NewInsert().Model(b).Exec(ctx)
		return dbErr(err)
	}
	res, err := db.NewUpdate().Model(b).WherePK().Where("soft_deleting = ?", false).
		ExcludeColumn("created_at", "soft_deleting").Exec(ctx)
	if err := deleted(res, err); errors.Is(err, ErrNotFound) {
		return ErrSoftDeleting
	} else if err != nil {
		return err
	}
	return nil
}

// SetBucketSoftDeleting flags or unflags a bucket as being deleted and
// reports whether this call changed it.
func SetBucketSoftDeleting(ctx context.Context, db bun.IDB, id int64, on bool) (bool, error) {
	res, err := db.NewUpdate().Model((*Bucket)(nil)).Set("soft_deleting = ?", on).
		Where("id = ? AND soft_deleting = ?", id, !on).Exec(ctx)
	if err != nil {
		return false, dbErr(err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// BucketSites returns the names of the sites where a bucket is available:
// those of its targets' available_on_sites and backup sites, by name.
func BucketSites(ctx context.Context, db bun.IDB, bucketID int64) ([]string, error) {
	var names []string
	err := db.NewSelect().Model((*Site)(nil)).Column("s.name").Distinct().
		Where(`s.id IN (SELECT ets.site_id FROM external_target_sites AS ets
			JOIN external_targets AS t ON t.id = ets.external_target_id WHERE t.bucket_id = ?)
			OR s.id IN (SELECT t.backup_site_id FROM external_targets AS t WHERE t.bucket_id = ?)`, bucketID, bucketID).
		Order("s.name").Scan(ctx, &names)
	return names, dbErr(err)
}

// DeleteBucket removes a bucket record; its targets keep their own
// settings and lose the reference.
func DeleteBucket(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*Bucket)(nil)).Where("id = ?", id).Exec(ctx)
	return deleted(res, err)
}

func targetRelations(q *bun.SelectQuery) *bun.SelectQuery {
	return q.Relation("Bucket").Relation("Bucket.Targets", func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Column("id", "bucket_id").Order("et.id")
	}).Relation("Sites", func(q *bun.SelectQuery) *bun.SelectQuery { return q.Order("s.id") })
}

// ExternalTargetsQuery selects targets, of one bucket when bucketID is non-nil.
func ExternalTargetsQuery(db bun.IDB, dest any, bucketID *int64) *bun.SelectQuery {
	q := targetRelations(db.NewSelect().Model(dest)).Order("et.name")
	if bucketID != nil {
		q = q.Where("et.bucket_id = ?", *bucketID)
	}
	return q
}

// GetExternalTarget loads one target with its bucket and sites.
func GetExternalTarget(ctx context.Context, db bun.IDB, id int64) (*ExternalTarget, error) {
	t := new(ExternalTarget)
	return t, dbErr(targetRelations(db.NewSelect().Model(t)).Where("et.id = ?", id).Scan(ctx))
}

// SaveExternalTarget inserts or updates t and, when siteIDs is non-nil,
// replaces the sites it is available on.
func SaveExternalTarget(ctx context.Context, db bun.IDB, t *ExternalTarget, siteIDs []int64) error {
	return runInTx(ctx, db, func(ctx context.Context, tx bun.IDB) error {
		if t.ID == 0 {
			t.CreatedAt = time.Now().UTC()
			if _, err := tx.NewInsert().Model(t).Exec(ctx); err != nil {
				return dbErr(err)
			}
		} else if _, err := tx.NewUpdate().Model(t).WherePK().ExcludeColumn("created_at").Exec(ctx); err != nil {
			return dbErr(err)
		}
		if siteIDs == nil {
			return nil
		}
		if _, err := tx.NewDelete().Model((*ExternalTargetSite)(nil)).Where("external_target_id = ?", t.ID).Exec(ctx); err != nil {
			return dbErr(err)
		}
		seen := map[int64]bool{}
		for _, id := range siteIDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			if _, err := tx.NewInsert().Model(&ExternalTargetSite{ExternalTargetID: t.ID, SiteID: id}).Exec(ctx); err != nil {
				return fmt.Errorf("site %d: %w", id, dbErr(err))
			}
		}
		return nil
	})
}

// DeleteExternalTarget removes one target.
func DeleteExternalTarget(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*ExternalTarget)(nil)).Where("id = ?", id).Exec(ctx)
	return deleted(res, err)
}
