package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// StoreSiteInventory records a site's counts, replaces its storage pools
// with the reported ones and upserts the reporting server.
func (a *Activities) StoreSiteInventory(ctx context.Context, in workflows.SiteInventoryInput) error {
	inv := in.Inventory
	rec := models.SiteInventory{Directories: inv.Directories, Files: inv.Files, Hydrated: inv.Hydrated,
		Stubbed: inv.Stubbed, At: time.Now().UTC()}
	for _, p := range inv.Pools {
		rec.Pools = append(rec.Pools, models.StoragePool{Name: p.Name, Filesystem: p.Filesystem, Capacity: p.Capacity,
			FreeSpace: p.FreeSpace, UsedSpace: p.UsedSpace, IsDefault: p.IsDefault})
	}
	ifs := map[string]any{}
	for name, it := range inv.Server.Interfaces {
		ifs[name] = map[string]any{"mac": it.MAC, "mtu": it.MTU, "up": it.Up, "addresses": it.Addresses}
	}
	rec.Server = &models.Server{Name: inv.Server.Hostname, ListOfInterfaces: ifs}
	if err := models.StoreSiteInventory(ctx, a.DB, in.SiteID, rec); err != nil {
		if errors.Is(err, models.ErrNotFound) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("site %d no longer exists", in.SiteID), vocab.ErrNotFound, err)
		}
		return fmt.Errorf("store inventory of site %d: %w", in.SiteID, err)
	}
	return nil
}

// RecordSpaceSite stores the state of a space's directory on a site.
func (a *Activities) RecordSpaceSite(ctx context.Context, in workflows.SpaceSiteState) error {
	if err := models.RecordSpaceSite(ctx, a.DB, in.SpaceID, in.Site, in.State, vocab.CleanErrorText(in.Message)); err != nil {
		return fmt.Errorf("record space %d on %s: %w", in.SpaceID, in.Site, err)
	}
	return nil
}

// BucketSites returns the sites where a bucket is available.
func (a *Activities) BucketSites(ctx context.Context, bucketID int64) ([]string, error) {
	sites, err := models.BucketSites(ctx, a.DB, bucketID)
	if err != nil {
		return nil, fmt.Errorf("sites of bucket %d: %w", bucketID, err)
	}
	return sites, nil
}

// DeleteBucketRecord removes a bucket's record; an absent one is done.
func (a *Activities) DeleteBucketRecord(ctx context.Context, bucketID int64) error {
	if err := models.DeleteBucket(ctx, a.DB, bucketID); err != nil && !errors.Is(err, models.ErrNotFound) {
		return fmt.Errorf("delete bucket %d: %w", bucketID, err)
	}
	return nil
}

// ClearBucketSoftDeleting makes a bucket whose deletion failed editable
// (and deletable) again.
func (a *Activities) ClearBucketSoftDeleting(ctx context.Context, bucketID int64) error {
	if _, err := models.SetBucketSoftDeleting(ctx, a.DB, bucketID, false); err != nil {
		return fmt.Errorf("clear soft_deleting of bucket %d: %w", bucketID, err)
	}
	return nil
}

// ListRemoteTarget lists an external target from the hub, which holds its
// credentials: only the target id travels through Temporal, never a secret.
func (a *Activities) ListRemoteTarget(ctx context.Context, in workflows.RemoteListInput) (site.TargetListing, error) {
	t, err := models.GetExternalTarget(ctx, a.DB, in.TargetID)
	if err != nil {
		return site.TargetListing{}, fmt.Errorf("external target %d: %w", in.TargetID, err)
	}
	cfg, err := TargetDriverConfig(t, a.Secrets)
	if err != nil {
		return site.TargetListing{}, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrTargetList, err)
	}
	cfg.MustExist = true // a listing creates no folder
	d, err := targets.Open(cfg)
	if err != nil {
		return site.TargetListing{}, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrTargetList, err)
	}
	l, err := site.ListTarget(ctx, d, in.Path, in.MaxItems, in.Marker)
	if errors.Is(err, site.ErrBadListPath) {
		return l, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBadListPath, err)
	}
	return l, err
}

// TargetDriverConfig builds the driver configuration of an external
// target: its own connection fields and credentials, each falling back to
// its bucket's. With a nil cipher the credentials are left out (for
// drivers that need none, such as filesystem folders).
func TargetDriverConfig(t *models.ExternalTarget, c *vocab.Cipher) (targets.Config, error) {
	loc, b := t.TargetLocation, t.Bucket
	pick := func(own, inherited string) string {
		if own != "" {
			return own
		}
		return inherited
	}
	cfg := targets.Config{StorageType: strings.ToLower(t.StorageType), SSLVerify: loc.SSLVerify}
	var bl models.TargetLocation
	if b != nil {
		bl = b.TargetLocation
		cfg.Bucket = b.Name
	}
	cfg.Endpoint = pick(loc.Endpoint, bl.Endpoint)
	cfg.Scheme = pick(loc.Scheme, bl.Scheme)
	cfg.Region = pick(loc.Region, bl.Region)
	folder := pick(loc.MigrationTargetFolder, bl.MigrationTargetFolder)
	if cfg.StorageType == "filesystem" {
		cfg.MigrationTargetFolder = folder
	} else {
		cfg.Prefix = folder
	}
	switch {
	case loc.Port != nil:
		cfg.Port = int(*loc.Port)
	case bl.Port != nil:
		cfg.Port = int(*bl.Port)
	}
	if c == nil {
		return cfg, nil
	}
	own, err := t.TargetSecrets.Open(c, "external_targets")
	if err != nil {
		return cfg, err
	}
	inherited := map[string]string{}
	if b != nil {
		if inherited, err = b.TargetSecrets.Open(c, "buckets"); err != nil {
			return cfg, err
		}
	}
	cfg.AccessKeyID = pick(own[vocab.SecretAccessKeyID], inherited[vocab.SecretAccessKeyID])
	if cfg.AccessKeyID == "" {
		cfg.AccessKeyID = pick(own[vocab.SecretAccessKey], inherited[vocab.SecretAccessKey])
	}
	cfg.SecretAccessKey = pick(own[vocab.SecretSecretAccessKey], inherited[vocab.SecretSecretAccessKey])
	return cfg, nil
}
