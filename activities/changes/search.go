package changes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// KindSearchCancel stops search RefID's workflow (its records are gone).
const KindSearchCancel = "search.cancel"

// SearchRequest is the body of POST /search/.
type SearchRequest struct {
	// Sites to ask; none: every site.
	Sites []string `json:"sites,omitempty"`
	// Path is the folder searched (default /).
	Path string `json:"path,omitempty"`
	// Recursive searches below Path at every depth (default true).
	Recursive *bool `json:"recursive,omitempty"`
	// Filters is the filter object (docs/search-analytics.md).
	Filters json.RawMessage `json:"filters,omitempty"`
	// MetadataFields are returned with each result ("*": all; "tags").
	MetadataFields []string `json:"metadata_fields,omitempty"`
	// Timeout bounds, in seconds, the wait for any site (default 60).
	Timeout int `json:"timeout,omitempty"`
}

// Bounds of a search request.
const (
	defaultSearchTimeout = 60
	maxSearchTimeout     = 3600
)

// parseFilters decodes the filter object strictly: an unknown key or a
// bad value is an error naming it.
func parseFilters(raw json.RawMessage) (site.SearchFilters, error) {
	var f site.SearchFilters
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return f, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return f, models.Invalid("filters", "An object: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	// Each key alone, so that an error names the key it is about.
	for k, v := range keys {
		one, _ := json.Marshal(map[string]json.RawMessage{k: v})
		dec := json.NewDecoder(bytes.NewReader(one))
		dec.DisallowUnknownFields()
		var part site.SearchFilters
		if err := dec.Decode(&part); err != nil {
			field := "filters." + k
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				field = "filters." + te.Field
			}
			msg := strings.TrimPrefix(err.Error(), "json: ")
			switch {
			case strings.HasPrefix(msg, "unknown field"):
				field, msg = "filters", fmt.Sprintf("Unknown filter %q: use name, type, size, mtime, atime, ctime, state, tags, metadata.", k)
			case strings.Contains(msg, "parsing time"):
				msg = "Times are RFC 3339 (2026-01-02T15:04:05Z): " + msg
			}
			return f, models.Invalid(field, msg)
		}
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return f, models.Invalid("filters", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := f.Validate(); err != nil {
		var fe *site.FilterError
		if errors.As(err, &fe) {
			return f, models.Invalid(fe.Field, fe.Reason)
		}
		return f, models.Invalid("filters", err.Error())
	}
	return f, nil
}

// CreateSearch validates req, records the search with a pending row per
// site and starts its SearchWorkflow (ID search-<id>) in the same commit.
// Bad input is a models.FieldErrors naming the field.
func (s *Service) CreateSearch(ctx context.Context, req SearchRequest, ownerID *int64) (*models.Search, error) {
	v := models.FieldErrors{}
	p := req.Path
	if p == "" {
		p = "/"
	}
	CheckPaths(v, "path", []string{p})
	if errs := v["path[0]"]; len(errs) > 0 {
		return nil, models.Invalid("path", errs[0])
	}
	p = path.Clean(p)
	filters, err := parseFilters(req.Filters)
	if err != nil {
		return nil, err
	}
	for i, f := range req.MetadataFields {
		v.Check(f == "*" || f == "tags" || site.ValidMetaKey(f), fmt.Sprintf("metadata_fields[%d]", i), "Not a metadata field name.")
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = defaultSearchTimeout
	}
	v.Check(timeout > 0 && timeout <= maxSearchTimeout, "timeout", fmt.Sprintf("Seconds between 1 and %d.", maxSearchTimeout))
	if err := v.Err(); err != nil {
		return nil, err
	}
	sites, err := searchSites(ctx, s, v, req.Sites)
	if err != nil {
		return nil, err
	}
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return nil, err
	}
	recursive := req.Recursive == nil || *req.Recursive
	fields := req.MetadataFields
	if fields == nil {
		fields = []string{}
	}
	var asMap map[string]any
	b, _ := json.Marshal(filters)
	_ = json.Unmarshal(b, &asMap)
	rec := &models.Search{OwnerID: ownerID, Path: p, Recursive: recursive, Filters: asMap, MetadataFields: fields,
		MaxResults: conf.SearchMaxResults}
	err = s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := models.CreateSearch(ctx, tx, rec, sites); err != nil {
			return err
		}
		start, err := NewStart(workflows.SearchWorkflowID(rec.ID), workflows.SearchWorkflowName, workflows.SearchInput{
			SearchID: rec.ID, Sites: sites, MaxResults: rec.MaxResults, Timeout: time.Duration(timeout) * time.Second,
			Query: site.SearchFilesInput{Path: p, Recursive: recursive, Filters: filters, Fields: fields}})
		if err != nil {
			return err
		}
		return tx.Owe(ctx, KindStart, rec.ID, start)
	})
	return rec, err
}

// searchSites resolves the requested sites (none: all), refusing unknown
// names under "sites".
func searchSites(ctx context.Context, s *Service, v models.FieldErrors, names []string) ([]string, error) {
	var all []models.Site
	if err := models.SitesQuery(s.DB, &all).Scan(ctx); err != nil {
		return nil, err
	}
	known := make([]string, len(all))
	for i, st := range all {
		known[i] = st.Name
	}
	if len(names) == 0 {
		if len(known) == 0 {
			return nil, models.Invalid("sites", "There is no site to search.")
		}
		slices.Sort(known)
		return known, nil
	}
	var out []string
	for i, n := range names {
		switch {
		case !slices.Contains(known, n):
			v.Add(fmt.Sprintf("sites[%d]", i), fmt.Sprintf("Site %q does not exist.", n))
		case !slices.Contains(out, n):
			out = append(out, n)
		}
	}
	return out, v.Err()
}

// DeleteSearch removes search id's records and stops its workflow, in one
// commit: the cancel is owed, and delivered (again) until Temporal takes
// it. A workflow that runs on meanwhile finds its search gone at its next
// page and ends.
func (s *Service) DeleteSearch(ctx context.Context, id int64) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := models.DeleteSearch(ctx, tx, id); err != nil {
			return err
		}
		return tx.Owe(ctx, KindSearchCancel, id, struct{}{})
	})
}

// deliverSearchCancel cancels the search's workflow; one already closed
// (or never started) is a cancel delivered.
func deliverSearchCancel(ctx context.Context, s *Service, in *models.Intent) error {
	err := s.Temporal.CancelWorkflow(ctx, workflows.SearchWorkflowID(in.RefID), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) || err != nil && strings.Contains(err.Error(), "already completed") {
		return nil
	}
	return err
}

// MetadataRequest is the body of PATCH /search/metadata/.
type MetadataRequest struct {
	Site  string   `json:"site"`
	Paths []string `json:"paths"`
	// Metadata sets fields; a null value removes the field.
	Metadata map[string]*string `json:"metadata,omitempty"`
	// Tags are added, RemoveTags removed.
	Tags       []string `json:"tags,omitempty"`
	RemoveTags []string `json:"remove_tags,omitempty"`
}

// maxMetadataPaths bounds the paths of one metadata request (one site
// activity, one answer).
const maxMetadataPaths = 1000

// metadataTimeout bounds the wait for the site.
const metadataTimeout = 30 * time.Second

// SetMetadata applies a metadata change on a site (through
// SetMetadataWorkflow) and records the field names and tags now in use.
func (s *Service) SetMetadata(ctx context.Context, req MetadataRequest) (*site.SetMetadataOutput, error) {
	v := models.FieldErrors{}
	v.Check(req.Site != "", "site", "This field is required.")
	v.Check(len(req.Paths) > 0, "paths", "At least one path is required.")
	v.Check(len(req.Paths) <= maxMetadataPaths, "paths", fmt.Sprintf("At most %d paths.", maxMetadataPaths))
	CheckPaths(v, "paths", req.Paths)
	change := site.MetaChange{Set: req.Metadata, AddTags: req.Tags, RemoveTags: req.RemoveTags}
	v.Check(len(change.Set)+len(change.AddTags)+len(change.RemoveTags) > 0, "metadata", "Nothing to change: give metadata, tags or remove_tags.")
	for k, val := range req.Metadata {
		v.Check(site.ValidMetaKey(k), "metadata", fmt.Sprintf("%q is not a field name: letters, digits, _ . - (at most 64; not \"tags\").", k))
		v.Check(val == nil || len(*val) <= site.MaxMetaValue, "metadata", fmt.Sprintf("The value of %q is longer than %d bytes.", k, site.MaxMetaValue))
	}
	for field, list := range map[string][]string{"tags": req.Tags, "remove_tags": req.RemoveTags} {
		for _, t := range list {
			v.Check(site.ValidTag(t), field, fmt.Sprintf("%q is not a tag: 1 to 64 printable characters without a comma.", t))
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if _, err := models.GetSiteByName(ctx, s.DB, req.Site); errors.Is(err, models.ErrNotFound) {
		return nil, models.Invalid("site", fmt.Sprintf("Site %q does not exist.", req.Site))
	} else if err != nil {
		return nil, err
	}
	var out site.SetMetadataOutput
	_, err := s.RunShort(ctx, Short{What: "Site " + req.Site, ID: "metadata-" + models.NewUUID(),
		Workflow: workflows.SetMetadataWorkflowName, Timeout: metadataTimeout + 10*time.Second,
		Input: workflows.SetMetadataInput{Site: req.Site, Timeout: metadataTimeout,
			Set: site.SetMetadataInput{Paths: req.Paths, Change: change}}}, &out)
	if err != nil {
		return nil, err
	}
	if err := models.EnsureMetadataFields(ctx, s.DB, out.Fields...); err != nil {
		return nil, err
	}
	return &out, models.EnsureTags(ctx, s.DB, out.Tags...)
}
