package changes

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// bucketNamePattern keeps bucket names usable as file names at the sites
// (<config>/targets/<name>.json) and as S3 bucket names.
var bucketNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// LocationInput are the connection fields buckets and targets share.
type LocationInput struct {
	Endpoint              *string         `json:"endpoint"`
	Port                  Nullable[int64] `json:"port"`
	Scheme                *string         `json:"scheme"`
	Region                *string         `json:"region"`
	SSLVerify             *bool           `json:"ssl_verify"`
	Container             *string         `json:"container"`
	StorageAccount        *string         `json:"storage_account"`
	MigrationTargetFolder *string         `json:"migration_target_folder"`
	AdvancedSettings      *map[string]any `json:"advanced_settings"`
}

func (in *LocationInput) apply(v models.FieldErrors, loc *models.TargetLocation) {
	setIf(&loc.Endpoint, in.Endpoint)
	if in.Port.Set {
		loc.Port = in.Port.Value()
		if p := loc.Port; p != nil && (*p < 1 || *p > 65535) {
			v.Add("port", "Enter a port between 1 and 65535.")
		}
	}
	if in.Scheme != nil {
		if sc := strings.ToLower(*in.Scheme); sc != "" && sc != "http" && sc != "https" {
			v.Add("scheme", "Must be http or https.")
		}
		loc.Scheme = strings.ToLower(*in.Scheme)
	}
	setIf(&loc.Region, in.Region)
	setIf(&loc.SSLVerify, in.SSLVerify)
	setIf(&loc.Container, in.Container)
	setIf(&loc.StorageAccount, in.StorageAccount)
	setIf(&loc.MigrationTargetFolder, in.MigrationTargetFolder)
	if in.AdvancedSettings != nil {
		loc.AdvancedSettings = nonNil(*in.AdvancedSettings)
	}
}

// SecretsInput are the secret inputs: accepted, sealed, never returned. A
// secret sent as "" (or credentials_json as null) clears it; one not sent
// is kept.
type SecretsInput struct {
	AccessKey       *string                  `json:"access_key"`
	AccessKeyID     *string                  `json:"access_key_id"`
	SecretAccessKey *string                  `json:"secret_access_key"`
	CredentialsJSON Nullable[map[string]any] `json:"credentials_json"`
	// Sealed are the secrets sent, sealed by the API, by field
	// (vocab.Secret*): what the write stores.
	Sealed map[string]string `json:"-"`
}

func (in *SecretsInput) apply(sec *models.TargetSecrets) {
	for f, v := range in.Sealed {
		*sec.Field(f) = v
	}
}

// BucketInput is the writable part of a bucket: its own fields, and the
// location and secret fields it shares with external targets.
type BucketInput struct {
	Name            *string `json:"name"`
	Label           *string `json:"label"`
	StorageType     *string `json:"storage_type"`
	CredentialsFile *string `json:"credentials_file"`
	LocationInput
	SecretsInput
}

var errBucketDeleting = models.Refusef("This bucket is being deleted and cannot be changed.")

type ExternalTargetInput struct {
	Name             *string                   `json:"name"`
	StorageType      *string                   `json:"storage_type"`
	LocalFileRegex   *string                   `json:"local_file_regex"`
	Enabled          *bool                     `json:"enabled"`
	BackupOnly       *bool                     `json:"backup_only"`
	BackupSite       Nullable[int64]           `json:"backup_site"`
	AvailableOnSites *[]int64                  `json:"available_on_sites"`
	DeleteOnRecall   *bool                     `json:"delete_on_recall"`
	Bucket           Nullable[json.RawMessage] `json:"bucket"`
	LocationInput
	SecretsInput
}

// bucketRef resolves the bucket input: an id (number or numeric string) or
// a name; null detaches the target from its bucket.
func bucketRef(ctx context.Context, db bun.IDB, v models.FieldErrors, raw json.RawMessage) (*int64, error) {
	var ref string
	var num json.Number
	if err := json.Unmarshal(raw, &ref); err != nil {
		if err := json.Unmarshal(raw, &num); err != nil {
			v.Add("bucket", "Expected a bucket id or name.")
			return nil, nil
		}
		ref = num.String()
	}
	b, err := models.FindBucket(ctx, db, ref)
	if errors.Is(err, models.ErrNotFound) {
		v.Add("bucket", "Bucket \""+ref+"\" does not exist.")
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if b.SoftDeleting {
		v.Add("bucket", "Bucket \""+b.Name+"\" is being deleted.")
	}
	return &b.ID, nil
}

func checkSiteID(ctx context.Context, db bun.IDB, v models.FieldErrors, field string, id int64) error {
	n, err := db.NewSelect().Model((*models.Site)(nil)).Where("id = ?", id).Count(ctx)
	if err != nil {
		return err
	}
	v.Check(n > 0, field, "Invalid pk \""+strconv.FormatInt(id, 10)+"\" - object does not exist.")
	return nil
}

// SaveBucket creates (id 0) or updates bucket id from in (its secrets
// sealed already). A bucket being deleted cannot change.
func (s *Service) SaveBucket(ctx context.Context, id int64, in BucketInput) (*models.Bucket, error) {
	create := id == 0
	var b *models.Bucket
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		b = &models.Bucket{TargetLocation: models.TargetLocation{SSLVerify: true, AdvancedSettings: map[string]any{}}}
		if !create {
			var err error
			if b, err = models.GetBucket(ctx, tx, id); err != nil {
				return err
			}
			if b.SoftDeleting {
				return errBucketDeleting
			}
		}
		v := models.FieldErrors{}
		if in.Name != nil || create {
			if err := CheckName(ctx, tx, v, (*models.Bucket)(nil), deref(in.Name), b.Name, "A bucket with this name already exists.",
				bucketNamePattern, "Enter a valid name: letters, digits, '.', '-' and '_', starting with a letter or digit."); err != nil {
				return err
			}
			b.Name = deref(in.Name)
		}
		if in.StorageType != nil || create {
			if strings.TrimSpace(deref(in.StorageType)) == "" {
				v.Add("storage_type", msgRequired)
			}
			b.StorageType = deref(in.StorageType)
		}
		setIf(&b.Label, in.Label)
		setIf(&b.CredentialsFile, in.CredentialsFile)
		in.LocationInput.apply(v, &b.TargetLocation)
		if err := v.Err(); err != nil {
			return err
		}
		in.SecretsInput.apply(&b.TargetSecrets)
		if err := models.SaveBucket(ctx, tx, b); errors.Is(err, models.ErrSoftDeleting) {
			return errBucketDeleting
		} else if err != nil {
			return err
		}
		var err error
		b, err = models.GetBucket(ctx, tx, b.ID)
		return err
	})
	return b, err
}

// SaveExternalTarget creates (id 0) or updates external target id from in
// (its secrets sealed already).
func (s *Service) SaveExternalTarget(ctx context.Context, id int64, in ExternalTargetInput) (*models.ExternalTarget, error) {
	create := id == 0
	var t *models.ExternalTarget
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		t = &models.ExternalTarget{Enabled: true, TargetLocation: models.TargetLocation{SSLVerify: true, AdvancedSettings: map[string]any{}}}
		if !create {
			var err error
			if t, err = models.GetExternalTarget(ctx, tx, id); err != nil {
				return err
			}
		}
		v := models.FieldErrors{}
		if in.Name != nil || create {
			if err := CheckName(ctx, tx, v, (*models.ExternalTarget)(nil), deref(in.Name), t.Name, "An external target with this name already exists.", nil, ""); err != nil {
				return err
			}
			t.Name = deref(in.Name)
		}
		if in.StorageType != nil || create {
			if strings.TrimSpace(deref(in.StorageType)) == "" {
				v.Add("storage_type", msgRequired)
			}
			t.StorageType = deref(in.StorageType)
		}
		if in.LocalFileRegex != nil || create {
			re := deref(in.LocalFileRegex)
			if re == "" {
				v.Add("local_file_regex", msgRequired)
			} else if _, err := regexp.Compile(re); err != nil {
				v.Add("local_file_regex", "Enter a valid regular expression: "+strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			}
			t.LocalFileRegex = re
		}
		setIf(&t.Enabled, in.Enabled)
		setIf(&t.BackupOnly, in.BackupOnly)
		setIf(&t.DeleteOnRecall, in.DeleteOnRecall)
		if in.BackupSite.Set {
			t.BackupSiteID = in.BackupSite.Value()
			if t.BackupSiteID != nil {
				if err := checkSiteID(ctx, tx, v, "backup_site", *t.BackupSiteID); err != nil {
					return err
				}
			}
		}
		var siteIDs []int64
		if in.AvailableOnSites != nil {
			siteIDs = append([]int64{}, *in.AvailableOnSites...)
			for _, id := range siteIDs {
				if err := checkSiteID(ctx, tx, v, "available_on_sites", id); err != nil {
					return err
				}
			}
		}
		if in.Bucket.Set {
			t.BucketID = nil
			if raw := in.Bucket.Value(); raw != nil {
				id, err := bucketRef(ctx, tx, v, *raw)
				if err != nil {
					return err
				}
				t.BucketID = id
			}
		}
		in.LocationInput.apply(v, &t.TargetLocation)
		if err := v.Err(); err != nil {
			return err
		}
		in.SecretsInput.apply(&t.TargetSecrets)
		t.Bucket, t.Sites = nil, nil
		if err := models.SaveExternalTarget(ctx, tx, t, siteIDs); err != nil {
			return err
		}
		var err error
		t, err = models.GetExternalTarget(ctx, tx, t.ID)
		return err
	})
	return t, err
}
