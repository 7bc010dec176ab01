package cj

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/cj/cjdoc"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// relLog is the relation of an item's link to its job log.
const relLog = "log"

// logDefaults show a whole log (at most 200 entries are kept) on one page.
var logDefaults = cjdoc.Defaults{MaxResults: 200, Cap: 200}

// billboard lists the resource types as links.
func (s *Server) billboard(k *call) error {
	coll := cjdoc.NewCollection(web.AbsURL(k.c, "/"))
	for _, r := range resources {
		coll.Links = append(coll.Links, cjdoc.Link{Rel: "resource", Href: web.AbsURL(k.c, "/"+r.name+"/"), Name: r.name, Prompt: r.prompt})
	}
	writeDoc(k.c, http.StatusOK, cjdoc.Document{Collection: coll})
	return nil
}

// list answers a collection GET: the page of items the query selects, its
// paging links and properties, the search queries and, for writers, the
// create template.
func (s *Server) list(k *call) error {
	ctx := k.c.Request.Context()
	q, err := cjdoc.ParseQuery(k.c.Request.URL.Query(), cjdoc.Defaults{})
	if err != nil {
		return err
	}
	if k.res.readOnly {
		s.refreshDatastores(ctx, k.site)
	}
	items, err := models.ListCJItems(ctx, s.DB, k.site, k.res.name, false)
	if err != nil {
		return err
	}
	docs, err := s.docs(ctx, k, items)
	if err != nil {
		return err
	}
	page, total := cjdoc.Apply(docs, q)
	href := collectionHref(k)
	coll := cjdoc.NewCollection(href)
	for _, d := range page {
		coll.Items = append(coll.Items, s.item(k, d))
	}
	coll.Links = cjdoc.PageLinks(href, q, total)
	coll.Queries = cjdoc.SearchQueries(href, k.res.search)
	if k.may(http.MethodPost) {
		coll.SetCreateTemplate(k.res.schema)
	}
	coll.Properties = cjdoc.PageProperties(q, total)
	k.c.Header("X-Total-Count", strconv.Itoa(total))
	writeDoc(k.c, http.StatusOK, cjdoc.Document{Collection: coll})
	return nil
}

// get answers an item GET.
func (s *Server) get(k *call) error {
	if k.res.readOnly {
		s.refreshDatastores(k.c.Request.Context(), k.site)
	}
	it, err := s.load(k)
	if errors.Is(err, models.ErrNotFound) {
		// An item being deleted is gone for every purpose but one: as in
		// Eve's soft delete, it answers 404 with its document (_deleted,
		// status and log link) so that clients can follow the deletion.
		if it, err = s.loadDeleting(k); err != nil {
			return err
		}
		return s.writeItem(k, http.StatusNotFound, it)
	} else if err != nil {
		return err
	}
	return s.writeItem(k, http.StatusOK, it)
}

// create stores a new item (NEW) and starts its change: 202 with Location.
func (s *Server) create(k *call) error {
	ctx := k.c.Request.Context()
	body, err := readBody(k)
	if err != nil {
		return err
	}
	doc, err := cjdoc.ParseWrite(body, k.res.schema, cjdoc.Create)
	if err != nil {
		return err
	}
	if err := s.check(k, doc, nil); err != nil {
		return err
	}
	it, subs := newItems(k, doc)
	if s.checked != nil {
		s.checked("create", it)
	}
	if err := writeError(s.Changes.CreateCJItems(ctx, it, subs, s.recheck(k, doc, nil))); err != nil {
		return err
	}
	k.c.Header("Location", itemHref(k, it.ID))
	return s.writeItem(k, http.StatusAccepted, it)
}

// update applies a PATCH to an item whose etag the client names, and
// starts its change: 202 with the item, now PENDING.
func (s *Server) update(k *call) error {
	ctx := k.c.Request.Context()
	it, err := s.load(k)
	if err != nil {
		return err
	}
	etag, err := precondition(k, it)
	if err != nil {
		return err
	}
	body, err := readBody(k)
	if err != nil {
		return err
	}
	edits, err := cjdoc.ParseUpdate(body, k.res.schemaFor(it), it.Data)
	if err != nil {
		return err
	}
	if err := s.check(k, edits, it); err != nil {
		return err
	}
	for name, v := range edits {
		switch name {
		case "comment":
			it.Comment, _ = v.(string)
		case "extras":
			it.Extras, _ = v.(map[string]any)
		case "name":
			it.Name, _ = v.(string)
			it.Data[name] = v
		default:
			it.Data[name] = v
		}
	}
	if it.Extras == nil {
		it.Extras = map[string]any{}
	}
	if err := writeError(s.Changes.UpdateCJItem(ctx, it, etag, s.recheck(k, edits, it))); err != nil {
		return err
	}
	return s.writeItem(k, http.StatusAccepted, it)
}

// remove hides an item whose etag the client names and starts the change
// that undoes its effect and then deletes it: 204.
func (s *Server) remove(k *call) error {
	ctx := k.c.Request.Context()
	it, err := s.load(k)
	if err != nil {
		return err
	}
	etag, err := precondition(k, it)
	if err != nil {
		return err
	}
	// Checked here for a quick answer, and again in the deletion's
	// transaction (recheckUnused), where no write referring to the item
	// can commit unseen.
	if err := inUseError(ctx, k, s.DB, it); err != nil {
		return err
	}
	if s.checked != nil {
		s.checked("delete", it)
	}
	var check changes.CJCheck
	if k.res.inUse != nil {
		check = func(ctx context.Context, tx bun.IDB) error { return inUseError(ctx, k, tx, it) }
	}
	if err := writeError(s.Changes.DeleteCJItem(ctx, it, etag, check)); err != nil {
		return err
	}
	k.c.Status(http.StatusNoContent)
	return nil
}

// inUseError is the 409 for an item that something still refers to
// (resource.inUse), or nil.
func inUseError(ctx context.Context, k *call, db bun.IDB, it *models.CJItem) error {
	if k.res.inUse == nil {
		return nil
	}
	msg, err := k.res.inUse(ctx, db, k.site, it)
	if err != nil {
		return err
	}
	if msg != "" {
		return conflict("%s %q cannot be deleted while %s; delete that first.", strings.TrimSuffix(k.res.name, "s"), it.Name, msg)
	}
	return nil
}

// log answers GET /<type>/<id>/log: the item's job log, one C+J item per
// entry, oldest first; where, sort and paging apply.
func (s *Server) log(k *call) error {
	q, err := cjdoc.ParseQuery(k.c.Request.URL.Query(), logDefaults)
	if err != nil {
		return err
	}
	it, err := s.load(k)
	if errors.Is(err, models.ErrNotFound) {
		it, err = s.loadDeleting(k)
	}
	if err != nil {
		return err
	}
	docs := make([]map[string]any, len(it.Log))
	for i, e := range it.Log {
		docs[i] = map[string]any{"id": i + 1, "time": e.Time.UTC(), "level": e.Level, "message": web.CleanErrorText(e.Message), "generation": e.Generation}
	}
	page, total := cjdoc.Apply(docs, q)
	href := itemHref(k, it.ID) + "/log"
	coll := cjdoc.NewCollection(href)
	logSchema := cjdoc.Schema{Fields: []cjdoc.Field{
		{Name: "time", Prompt: "Time"}, {Name: "level", Prompt: "Level"},
		{Name: "message", Prompt: "Message"}, {Name: "generation", Prompt: "Change"},
	}}
	for _, d := range page {
		coll.Items = append(coll.Items, cjdoc.NewItem(fmt.Sprintf("%s#%v", href, d["id"]), d, logSchema))
	}
	coll.Links = append(cjdoc.PageLinks(href, q, total), cjdoc.Link{Rel: "up", Href: itemHref(k, it.ID), Prompt: "The item"})
	coll.Properties = cjdoc.PageProperties(q, total)
	k.c.Header("X-Total-Count", strconv.Itoa(total))
	writeDoc(k.c, http.StatusOK, cjdoc.Document{Collection: coll})
	return nil
}

// load reads the item the path names; a malformed id is 404 too.
func (s *Server) load(k *call) (*models.CJItem, error) {
	id, err := web.PathID(k.c, "id")
	if err != nil {
		return nil, errNotFound
	}
	return models.GetCJItem(k.c.Request.Context(), s.DB, k.site, k.res.name, id)
}

// loadDeleting reads the item the path names if its deletion is under way.
func (s *Server) loadDeleting(k *call) (*models.CJItem, error) {
	id, err := web.PathID(k.c, "id")
	if err != nil {
		return nil, errNotFound
	}
	it, err := models.GetCJItemByID(k.c.Request.Context(), s.DB, id)
	if err != nil || !it.Deleted || it.Site != k.site || it.Type != k.res.name {
		return nil, errNotFound
	}
	return it, nil
}

// check runs the checks of a write beyond its schema: the text limits
// both APIs share (web.CheckText: no NUL, no string over its field's
// limit), then the resource's own checks, which may need the database.
func (s *Server) check(k *call, doc map[string]any, cur *models.CJItem) error {
	v := &validator{ctx: k.c.Request.Context(), db: s.DB, site: k.site}
	for _, name := range slices.Sorted(maps.Keys(doc)) {
		web.CheckText(name, doc[name], func(field, msg string) { v.fail(field, "%s", msg) })
	}
	if err := v.err(); err != nil || k.res.check == nil {
		return err
	}
	if err := k.res.check(v, doc, cur); err != nil {
		return err
	}
	return v.err()
}

// recheck returns the write's database checks (resource.check) to run
// again in its transaction (changes.CJCheck), on a copy of the checked
// doc: what it refers to may have been deleted since s.check ran, and
// only the transaction's answer holds (a reviewer showed a snapshot
// accepted for a space whose deletion was accepted at the same moment).
// Its references are looked up with their rows locked (validator.lock).
func (s *Server) recheck(k *call, doc map[string]any, cur *models.CJItem) changes.CJCheck {
	if k.res.check == nil {
		return nil
	}
	doc, _ = cloneJSON(doc).(map[string]any)
	return func(ctx context.Context, tx bun.IDB) error {
		v := &validator{ctx: ctx, db: tx, site: k.site, lock: true}
		if err := k.res.check(v, doc, cur); err != nil {
			return err
		}
		return v.err()
	}
}

// newItems turns a checked create into its item and, for a space that
// lists exposers, those exposers' items.
func newItems(k *call, doc map[string]any) (*models.CJItem, []*models.CJItem) {
	it := &models.CJItem{Site: k.site, Type: k.res.name, Data: map[string]any{}, Extras: map[string]any{}}
	var subs []*models.CJItem
	for name, v := range doc {
		switch name {
		case "comment":
			it.Comment, _ = v.(string)
		case "extras":
			if m, ok := v.(map[string]any); ok {
				it.Extras = m
			}
		case "exposers":
			// A space's exposers are items of their own; the space shows
			// them as they are.
			for _, e := range v.([]any) {
				m := e.(map[string]any)
				exp, _ := exposerSchema.Variant(m["type"].(string))
				data := map[string]any{}
				for _, f := range exp.Fields {
					if f.Default != nil {
						data[f.Name] = cloneJSON(f.Default)
					}
				}
				data["name"], data["type"], data["space"] = m["name"], m["type"], doc["name"]
				subs = append(subs, &models.CJItem{Site: k.site, Type: models.CJExposers, Name: m["name"].(string),
					Data: data, Extras: map[string]any{}})
			}
		default:
			it.Data[name] = v
		}
	}
	it.Name, _ = doc["name"].(string)
	if k.res.scope != nil {
		it.Scope = k.res.scope(doc)
	}
	return it, subs
}

// cloneJSON copies a default so that no item shares it.
func cloneJSON(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneJSON(e)
		}
		return out
	}
	return v
}

// writeError answers what keeps a write from being stored: 409 for a
// space the hub API still uses or marks immutable, 422 on name for a name
// or folder another space or item has.
func writeError(err error) error {
	var hs *changes.HubSpaceError
	if !errors.As(err, &hs) {
		if errors.Is(err, models.ErrConflict) {
			return &cjdoc.ValidationError{Fields: []cjdoc.FieldError{{Name: "name", Message: "is already in use"}}}
		}
		return err
	}
	detail := func(sentinel error) string {
		return strings.TrimPrefix(hs.Err.Error(), sentinel.Error()+": ")
	}
	switch {
	case errors.Is(err, models.ErrInUse):
		return conflict("The space cannot be deleted while %s; delete that first (the folder is kept).", detail(models.ErrInUse))
	case errors.Is(err, models.ErrImmutableSpace):
		return conflict("The space cannot be changed or deleted: %s.", detail(models.ErrImmutableSpace))
	case errors.Is(err, models.ErrConflict):
		return &cjdoc.ValidationError{Fields: []cjdoc.FieldError{{Name: "name", Message: detail(models.ErrConflict)}}}
	}
	return err
}

// refreshDatastores asks the site for fresh pool figures, at most every
// few seconds, and waits a bounded time: a slow or absent site leaves the
// stored figures, which are served as they are.
func (s *Server) refreshDatastores(ctx context.Context, site string) {
	const fresh = 5 * time.Second
	s.mu.Lock()
	last := s.refreshed[site]
	s.mu.Unlock()
	if time.Since(last) < fresh {
		return
	}
	wait := s.DatastoreWait
	if wait <= 0 {
		wait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, err := s.Changes.RunShort(ctx, changes.Short{What: "Data stores", ID: workflows.CJDatastoresWorkflowID(site),
		Workflow: workflows.CJDatastoresWorkflowName, Input: site, Join: true, Timeout: time.Minute}, nil)
	if err != nil {
		s.Log.Warn("datastores not refreshed; serving the stored figures", "site", site, "error", err)
		return
	}
	s.mu.Lock()
	if s.refreshed == nil {
		s.refreshed = map[string]time.Time{}
	}
	s.refreshed[site] = time.Now()
	s.mu.Unlock()
}

// docs renders items as the JSON documents queries run over: the item's
// fields, the meta fields every item has, and derived fields (a space's
// exposers; its profile, null when it has none).
func (s *Server) docs(ctx context.Context, k *call, items []models.CJItem) ([]map[string]any, error) {
	var bySpace map[string][]any
	if k.res.name == models.CJSpaces {
		exps, err := models.ListCJItems(ctx, s.DB, k.site, models.CJExposers, false)
		if err != nil {
			return nil, err
		}
		bySpace = map[string][]any{}
		for _, e := range exps {
			space, _ := e.Data["space"].(string)
			bySpace[space] = append(bySpace[space], map[string]any{"id": e.ID, "name": e.Name, "type": e.Data["type"]})
		}
	}
	docs := make([]map[string]any, len(items))
	for i := range items {
		d := itemDoc(&items[i])
		if bySpace != nil {
			exps := bySpace[items[i].Name]
			if exps == nil {
				exps = []any{}
			}
			d["exposers"] = exps
			if _, ok := d["profile"]; !ok {
				d["profile"] = nil // every space shows its profile, none included
			}
			// The hub API's side of the same space (its id and name there).
			d["hub_space"] = nil
			if hub, err := models.SpaceByMountpoint(ctx, s.DB, models.CJSpaceMountpoint(items[i].Name)); err == nil {
				d["hub_space"] = map[string]any{"id": hub.ID, "name": hub.Name}
			} else if !errors.Is(err, models.ErrNotFound) {
				return nil, err
			}
		}
		docs[i] = d
	}
	return docs, nil
}

func itemDoc(it *models.CJItem) map[string]any {
	d := make(map[string]any, len(it.Data)+7)
	maps.Copy(d, it.Data)
	d["id"] = it.ID
	d["_etag"] = it.Etag
	d["_created"] = it.Created.UTC().Truncate(time.Microsecond)
	d["_modified"] = it.Modified.UTC().Truncate(time.Microsecond)
	d["status"] = it.Status
	d["comment"] = it.Comment
	extras := it.Extras
	if extras == nil {
		extras = map[string]any{}
	}
	d["extras"] = extras
	if it.Deleted {
		d["_deleted"] = true
	}
	return d
}

// item renders a document as a C+J item with its links.
func (s *Server) item(k *call, doc map[string]any) cjdoc.Item {
	id, _ := doc["id"].(int64)
	href := itemHref(k, id)
	it := cjdoc.NewItem(href, doc, k.res.schema)
	if !k.res.readOnly {
		it.Links = []cjdoc.Link{{Rel: relLog, Href: href + "/log", Prompt: "Job log"}}
	}
	return it
}

// writeItem answers with one item, its ETag and, for writers, its update
// template filled with the current values.
func (s *Server) writeItem(k *call, status int, it *models.CJItem) error {
	docs, err := s.docs(k.c.Request.Context(), k, []models.CJItem{*it})
	if err != nil {
		return err
	}
	coll := cjdoc.NewCollection(collectionHref(k))
	coll.Items = []cjdoc.Item{s.item(k, docs[0])}
	coll.Links = []cjdoc.Link{{Rel: "self", Href: itemHref(k, it.ID)}}
	if k.id.Has(auth.RoleStorageAdmin) && !k.res.readOnly && !it.Deleted {
		t := cjdoc.UpdateTemplate(k.res.schemaFor(it))
		for i := range t.Data {
			if v, ok := docs[0][t.Data[i].Name]; ok {
				t.Data[i].Value = v
			}
		}
		coll.Template = &t
	}
	k.c.Header("ETag", strconv.Quote(it.Etag))
	writeDoc(k.c, status, cjdoc.Document{Collection: coll})
	return nil
}

// precondition checks If-Match against the item's etag and returns the
// etag the write must still find (compare-and-swap). Tags may be quoted or
// not, weak or strong; * matches any.
func precondition(k *call, it *models.CJItem) (string, error) {
	h := strings.TrimSpace(k.c.GetHeader("If-Match"))
	if h == "" {
		return "", errNeedsIfMatch
	}
	for _, tag := range strings.Split(h, ",") {
		tag = strings.Trim(strings.TrimPrefix(strings.TrimSpace(tag), "W/"), `"`)
		if tag == "*" || tag == it.Etag {
			return it.Etag, nil
		}
	}
	return "", errStale
}

// readBody reads a write body of a JSON media type (C+J's, or plain JSON
// for convenience), refusing big ones before buffering them, and text that
// is not valid UTF-8 (which decoding would silently replace).
func readBody(k *call) ([]byte, error) {
	if ct := k.c.GetHeader("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, errMediaType
		}
	}
	body, err := io.ReadAll(io.LimitReader(k.c.Request.Body, maxBody+1))
	if err != nil {
		return nil, &cjdoc.BodyError{Reason: "the body could not be read"}
	}
	if len(body) > maxBody {
		return nil, errBodyTooLarge
	}
	if msg := web.JSONTextError(body); msg != "" {
		return nil, &cjdoc.BodyError{Reason: msg}
	}
	return body, nil
}

func collectionHref(k *call) string { return web.AbsURL(k.c, "/"+k.res.name+"/") }

func itemHref(k *call, id int64) string {
	return web.AbsURL(k.c, "/"+k.res.name+"/"+strconv.FormatInt(id, 10))
}
