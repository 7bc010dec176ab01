package changes

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
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
