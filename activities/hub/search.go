package hub

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

func searchGone(err error) error {
	if errors.Is(err, models.ErrSearchGone) || errors.Is(err, models.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError("the search was deleted", vocab.ErrNotFound, err)
	}
	return err
}

// StoreSearchPage stores a page of a site's search results as far as the
// search's cap allows, and returns how many more results it may take.
func (a *Activities) StoreSearchPage(ctx context.Context, p workflows.SearchPage) (int64, error) {
	rows := make([]models.SearchResult, len(p.Files))
	for i, f := range p.Files {
		rows[i] = models.SearchResult{Path: f.Path, Name: f.Name, Type: f.Type, Size: f.Size,
			Mtime: f.Mtime, Atime: f.Atime, Ctime: f.Ctime, State: string(f.State), Metadata: f.Metadata}
	}
	room, err := models.StoreSearchResults(ctx, a.DB, p.SearchID, p.Site, rows)
	if err != nil {
		return 0, searchGone(err)
	}
	if room <= 0 && p.More {
		err = models.MarkSearchTruncated(ctx, a.DB, p.SearchID)
	}
	var tags []string
	for _, f := range p.Files {
		if t, ok := f.Metadata["tags"].([]any); ok {
			for _, v := range t {
				if s, ok := v.(string); ok {
					tags = append(tags, s)
				}
			}
		}
	}
	if err == nil && len(tags) > 0 {
		err = models.EnsureTags(ctx, a.DB, tags...)
	}
	return room, err
}

// RecordIndexFields adds the metadata keys and tags a site's scan found to
// the hub's lists of them.
func (a *Activities) RecordIndexFields(ctx context.Context, f workflows.IndexFields) error {
	if err := models.EnsureMetadataFields(ctx, a.DB, f.MetadataFields...); err != nil {
		return err
	}
	return models.EnsureTags(ctx, a.DB, f.Tags...)
}

// FinishSearchSite records how a site ended in a search.
func (a *Activities) FinishSearchSite(ctx context.Context, r workflows.SearchSiteResult) error {
	var scanned *time.Time
	if !r.Scanned.IsZero() {
		scanned = &r.Scanned
	}
	return searchGone(models.SetSearchSite(ctx, a.DB, r.SearchID, r.Site, r.Status, vocab.CleanErrorText(r.Error), scanned))
}

// FinishSearch marks a search finished.
func (a *Activities) FinishSearch(ctx context.Context, id int64) error {
	return searchGone(models.FinishSearch(ctx, a.DB, id))
}
