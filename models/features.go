package models

import (
	"context"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Feature is a feature flag. The set of flags is seeded by the catalogue
// migration (docs/catalogue-definitions.md); operators only switch them.
type Feature struct {
	bun.BaseModel `bun:"table:features,alias:f"`

	Name        string `bun:"name,pk"`
	Description string `bun:"description"`
	Enabled     bool   `bun:"enabled"`
}

// FeaturesQuery selects feature flags into dest, ordered by name.
func FeaturesQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Order("f.name")
}

// GetFeature loads a feature flag by name.
func GetFeature(ctx context.Context, db bun.IDB, name string) (*Feature, error) {
	f := new(Feature)
	err := db.NewSelect().Model(f).Where("f.name = ?", name).Scan(ctx)
	return f, dbErr(err)
}

// SetFeatureEnabled switches a feature flag.
func SetFeatureEnabled(ctx context.Context, db bun.IDB, name string, enabled bool) error {
	res, err := db.NewUpdate().Model((*Feature)(nil)).Set("enabled = ?", enabled).Where("name = ?", name).Exec(ctx)
	return affected(res, err)
}

// FileStatusType is how the UI shows a file migration status.
type FileStatusType struct {
	bun.BaseModel `bun:"table:file_status_types,alias:fst"`

	Key             string `bun:"key,pk"`
	Label           string `bun:"label"`
	BackgroundColor string `bun:"background_color"`
	TextColor       string `bun:"text_color"`
	Position        int    `bun:"position"`
}

// FileStatusTypesQuery selects file status types into dest in display order.
func FileStatusTypesQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Order("fst.position", "fst.key")
}

// GetFileStatusType loads a file status type by key.
func GetFileStatusType(ctx context.Context, db bun.IDB, key string) (*FileStatusType, error) {
	t := new(FileStatusType)
	err := db.NewSelect().Model(t).Where("fst.key = ?", key).Scan(ctx)
	return t, dbErr(err)
}

// UpdateFileStatusType stores the label and colours of t.
func UpdateFileStatusType(ctx context.Context, db bun.IDB, t *FileStatusType) error {
	res, err := db.NewUpdate().Model(t).Column("label", "background_color", "text_color").WherePK().Exec(ctx)
	return affected(res, err)
}

// CertificateLifetime is the validity of one kind of certificate the hub
// issues.
type CertificateLifetime struct {
	bun.BaseModel `bun:"table:certificate_lifetimes,alias:cl"`

	ID          int64      `bun:"id,pk,autoincrement"`
	Name        string     `bun:"name"`
	Description string     `bun:"description"`
	Days        int64      `bun:"days"`
	UpdatedAt   *time.Time `bun:"updated_at"`
	UpdatedBy   *int64     `bun:"updated_by"`
}

// CertificateLifetimes returns every certificate lifetime by id.
func CertificateLifetimes(ctx context.Context, db bun.IDB) ([]CertificateLifetime, error) {
	var ls []CertificateLifetime
	err := db.NewSelect().Model(&ls).Order("cl.id").Scan(ctx)
	return ls, dbErr(err)
}

// GetCertificateLifetime loads a certificate lifetime by id.
func GetCertificateLifetime(ctx context.Context, db bun.IDB, id int64) (*CertificateLifetime, error) {
	l := new(CertificateLifetime)
	err := db.NewSelect().Model(l).Where("cl.id = ?", id).Scan(ctx)
	return l, dbErr(err)
}

// SetCertificateLifetime changes the days of a lifetime, recording who and
// when.
func SetCertificateLifetime(ctx context.Context, db bun.IDB, id, days, userID int64) error {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*CertificateLifetime)(nil)).
		Set("days = ?", days).Set("updated_at = ?", now).Set("updated_by = ?", userID).
		Where("id = ?", id).Exec(ctx)
	return affected(res, err)
}

// Tag is a label found in file metadata.
type Tag struct {
	bun.BaseModel `bun:"table:tags,alias:tg"`

	ID        int64     `bun:"id,pk,autoincrement"`
	Name      string    `bun:"name"`
	CreatedAt time.Time `bun:"created_at"`
}

// Tags returns the tags whose name contains filter (case-insensitive;
// empty means all), ordered by name.
func Tags(ctx context.Context, db bun.IDB, filter string) ([]Tag, error) {
	var ts []Tag
	q := db.NewSelect().Model(&ts).Order("tg.name")
	if filter != "" {
		q = q.Where("LOWER(tg.name) LIKE ? ESCAPE '!'", likeContains(filter))
	}
	err := q.Scan(ctx)
	return ts, dbErr(err)
}

// EnsureTags records tag names, ignoring those already known; the file
// metadata indexer calls it with the tags it meets.
func EnsureTags(ctx context.Context, db bun.IDB, names ...string) error {
	now := time.Now().UTC()
	for _, n := range names {
		if n == "" {
			continue
		}
		_, err := db.NewInsert().Model(&Tag{Name: n, CreatedAt: now}).On("CONFLICT (name) DO NOTHING").Exec(ctx)
		if err != nil {
			return dbErr(err)
		}
	}
	return nil
}

// likeContains returns a LIKE pattern (escape character '!') matching
// lower-cased values that contain s literally.
func likeContains(s string) string {
	r := strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")
	return "%" + r.Replace(strings.ToLower(s)) + "%"
}
