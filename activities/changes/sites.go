package changes

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// siteNamePattern is the spec's pattern for site (and queue) names.
var siteNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// SiteInput is the writable part of a site; nil means "not sent".
type SiteInput struct {
	Name                      *string         `json:"name"`
	Label                     *string         `json:"label"`
	Shortcode                 *string         `json:"shortcode"`
	Type                      *string         `json:"type"`
	Timezone                  *string         `json:"timezone"`
	PublicURL                 *string         `json:"public_url"`
	StorageSearchURL          *string         `json:"storage_search_url"`
	SearchengineURL           *string         `json:"searchengine_url"`
	Bandwidth                 *int64          `json:"bandwidth"`
	Color                     *[]int64        `json:"color"`
	AmIConfigured             *bool           `json:"am_i_configured"`
	ReadyToConfigure          *bool           `json:"ready_to_configure"`
	AddonEnabled              *bool           `json:"addon_enabled"`
	DirectoriesCount          *int64          `json:"directories_count"`
	FilesCount                *int64          `json:"files_count"`
	FilesHydratedCount        *int64          `json:"files_hydrated_count"`
	FilesStubbedCount         *int64          `json:"files_stubbed_count"`
	EnableAutoFileBatchSizing *bool           `json:"enable_auto_file_batch_sizing"`
	FileBatchGB               *int64          `json:"file_batch_gb"`
	FileBatchSize             *int64          `json:"file_batch_size"`
	FSIscanBuckets            *int64          `json:"fs_iscan_buckets"`
	FSIscanThreads            *int64          `json:"fs_iscan_threads"`
	LockThreshold             *int64          `json:"lock_threshold"`
	Include                   *map[string]any `json:"include"`
	Exclude                   *map[string]any `json:"exclude"`
	Spaces                    *[]string       `json:"spaces"`
}

// apply validates in and copies it onto site; create demands the name.
func (in *SiteInput) apply(ctx context.Context, db bun.IDB, site *models.Site, create bool) error {
	v := models.FieldErrors{}
	if in.Name != nil || create {
		name := deref(in.Name)
		if err := CheckName(ctx, db, v, (*models.Site)(nil), name, site.Name, "A site with this name already exists.",
			siteNamePattern, "Enter a valid name: letters, digits, - and _ only."); err != nil {
			return err
		}
		site.Name = name
		if create && in.Label == nil {
			site.Label = name
		}
	}
	if in.Timezone != nil {
		if _, err := time.LoadLocation(*in.Timezone); err != nil || *in.Timezone == "" {
			v.Add("timezone", "Enter a valid IANA time zone name, e.g. Europe/Paris.")
		}
	}
	for field, u := range map[string]*string{"public_url": in.PublicURL, "storage_search_url": in.StorageSearchURL, "searchengine_url": in.SearchengineURL} {
		if u != nil {
			checkURL(v, field, *u)
		}
	}
	for field, n := range map[string]*int64{"bandwidth": in.Bandwidth, "directories_count": in.DirectoriesCount,
		"files_count": in.FilesCount, "files_hydrated_count": in.FilesHydratedCount, "files_stubbed_count": in.FilesStubbedCount,
		"file_batch_gb": in.FileBatchGB, "file_batch_size": in.FileBatchSize, "fs_iscan_buckets": in.FSIscanBuckets,
		"fs_iscan_threads": in.FSIscanThreads, "lock_threshold": in.LockThreshold} {
		CheckNotNeg(v, field, n)
	}
	if in.Color != nil {
		CheckColor(v, "color", *in.Color)
		site.Color = append([]int64{}, *in.Color...)
	}
	setIf(&site.Label, in.Label)
	setIf(&site.Shortcode, in.Shortcode)
	setIf(&site.Type, in.Type)
	setIf(&site.Timezone, in.Timezone)
	setIf(&site.PublicURL, in.PublicURL)
	setIf(&site.StorageSearchURL, in.StorageSearchURL)
	setIf(&site.SearchengineURL, in.SearchengineURL)
	setIf(&site.Bandwidth, in.Bandwidth)
	setIf(&site.AmIConfigured, in.AmIConfigured)
	setIf(&site.ReadyToConfigure, in.ReadyToConfigure)
	setIf(&site.AddonEnabled, in.AddonEnabled)
	setIf(&site.DirectoriesCount, in.DirectoriesCount)
	setIf(&site.FilesCount, in.FilesCount)
	setIf(&site.FilesHydratedCount, in.FilesHydratedCount)
	setIf(&site.FilesStubbedCount, in.FilesStubbedCount)
	setIf(&site.EnableAutoFileBatchSizing, in.EnableAutoFileBatchSizing)
	setIf(&site.FileBatchGB, in.FileBatchGB)
	setIf(&site.FileBatchSize, in.FileBatchSize)
	setIf(&site.FSIscanBuckets, in.FSIscanBuckets)
	setIf(&site.FSIscanThreads, in.FSIscanThreads)
	setIf(&site.LockThreshold, in.LockThreshold)
	if in.Include != nil {
		site.Include = nonNil(*in.Include)
	}
	if in.Exclude != nil {
		site.Exclude = nonNil(*in.Exclude)
	}
	return v.Err()
}

// SaveSite creates (id 0) or updates site id from in. spaces, when sent,
// replaces the site's spaces by name: the folders of spaces added are made
// on the site, those of spaces removed are removed if empty.
func (s *Service) SaveSite(ctx context.Context, id int64, in SiteInput) (*models.Site, error) {
	create := id == 0
	var site *models.Site
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		site = models.NewSite("")
		if !create {
			var err error
			if site, err = models.GetSite(ctx, tx, id); err != nil {
				return err
			}
		}
		oldTZ := siteTZ(site)
		if err := in.apply(ctx, tx, site, create); err != nil {
			return err
		}
		var err error
		if create {
			err = models.CreateSite(ctx, tx, site)
		} else {
			err = models.UpdateSite(ctx, tx, site)
		}
		if err != nil {
			return err
		}
		if !create && siteTZ(site) != oldTZ {
			if err := siteTimezoneChanged(ctx, tx, site, oldTZ); err != nil {
				return err
			}
		}
		if in.Spaces == nil {
			site, err = models.GetSite(ctx, tx, site.ID)
			return err
		}
		added, removed, err := models.SetSiteSpaces(ctx, tx, site, *in.Spaces)
		if errors.Is(err, models.ErrNotFound) {
			return models.Invalid("spaces", fmt.Sprintf("Object does not exist: %s.", err.Error()))
		} else if err != nil {
			return err
		}
		if site, err = models.GetSite(ctx, tx, site.ID); err != nil {
			return err
		}
		for _, sp := range added {
			ops, err := siteJoinsSpace(ctx, tx, &sp, site.Name)
			if err == nil {
				err = OweSpaceOps(ctx, tx, sp.ID, ops)
			}
			if err != nil {
				return err
			}
		}
		for _, sp := range removed {
			ops, err := siteLeavesSpace(ctx, tx, &sp, site.Name)
			if err == nil {
				err = OweSpaceOps(ctx, tx, sp.ID, ops)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return site, err
}

// siteTimezoneChanged brings the schedules and policies of site, whose
// timezone was oldTZ, in step with its new one at once (the reconciler
// would within a minute): their Temporal Schedules, and the
// start_date_time of the policies whose schedule follows the site.
func siteTimezoneChanged(ctx context.Context, tx *Tx, site *models.Site, oldTZ string) error {
	var ids []int64
	if err := tx.NewSelect().Model((*models.Schedule)(nil)).Column("id").Where("site_id = ?", site.ID).Scan(ctx, &ids); err != nil {
		return err
	}
	for _, id := range ids {
		if err := oweSync(ctx, tx, id, workflows.ScheduleTemporalID(id)); err != nil {
			return err
		}
	}
	var policies []models.Policy
	if err := tx.NewSelect().Model(&policies).Where("site_id = ?", site.ID).Scan(ctx); err != nil {
		return err
	}
	for i := range policies {
		p := &policies[i]
		if p.Schedule != nil && (p.Schedule.Timezone == "" || p.Schedule.Timezone == oldTZ) {
			p.Site, p.Schedule.Timezone = site, "" // a copy of the site's follows it (applyPolicy)
			p.Schedule.StartDateTime = startDateTime(p.Schedule, siteTZ(site), time.Now())
			if err := models.SavePolicy(ctx, tx, p); err != nil {
				return err
			}
		}
		if err := oweSync(ctx, tx, p.ID, workflows.PolicyTemporalID(p.ID)); err != nil {
			return err
		}
	}
	return nil
}
