package cj

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/cj/cjdoc"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// Patterns of the template data (Python's dialect, as the spec writes it;
// cjdoc reads \Z as end of text). Names become file and folder names at the
// site, and the other values end up in configuration files, so none of
// them may hold spaces, quotes or line breaks.
const (
	nameRegex    = `^[\w\-]+\Z`
	poolRegex    = `^[\w\-]+\Z`
	kindRegex    = `^(placement|migration)\Z`
	ruleRegex    = `^[^\r\n;]*\Z`
	optionsRegex = `^[\w=,:./\-]*\Z`
	// pathRegex: an exposer's path goes into the site's exports line or
	// share section as it is (site.CheckSharePath refuses the same): a
	// double quote would end the quoted path of an exports line and let
	// the rest add a client with options of its own (a reviewer's
	// finding); backslashes escape, % is a Samba substitution.
	pathRegex = `^[^\x00-\x1f\x7f"\\%]*\Z`
	pathHint  = "no double quotes, backslashes, % or control characters (the path is written into the site's export and share files as it is)"
)

// Patterns of list elements, which template data cannot advertise.
var (
	userRegex = mustRegex(`^[A-Za-z0-9_.@+-]+$`)
	nameRE    = mustRegex(`^[A-Za-z0-9_-]+$`)
)

// Limits on lists a client sends.
const (
	maxListLen = 1000
	maxPathLen = 1024
)

// resource is one collection of the API: its schema, what the collection
// offers, and the checks that need the database.
type resource struct {
	name   string
	prompt string
	schema cjdoc.Schema
	// readOnly resources (datastores) are never created, changed or deleted.
	readOnly bool
	// search lists the fields offered as search queries.
	search []string
	// check validates a write beyond the schema (references to other
	// items) and normalises doc in place; cur is nil on create.
	check func(v *validator, doc map[string]any, cur *models.CJItem) error
	// scope returns the uniqueness scope of an item's name.
	scope func(doc map[string]any) string
	// inUse names what still refers to an item, which forbids deleting it.
	inUse func(ctx context.Context, db bun.IDB, site string, it *models.CJItem) (string, error)
}

// metaFields are the writable fields every item has.
func metaFields(fields ...cjdoc.Field) []cjdoc.Field {
	return append(fields,
		cjdoc.Field{Name: "comment", Prompt: "Comment", Type: cjdoc.TypeString},
		cjdoc.Field{Name: "extras", Prompt: "Extras (additional settings or metadata)", Type: cjdoc.TypeObject},
	)
}

func nameField(immutable bool) cjdoc.Field {
	return cjdoc.Field{Name: "name", Prompt: "Name", Type: cjdoc.TypeString, Required: true, Regex: nameRegex, Immutable: immutable}
}

// exposerSchema is polymorphic: the type field (nfs, cifs, gpfsnative)
// selects the fields of each kind of exposer.
var exposerSchema = cjdoc.Schema{Type: models.CJExposers, Fields: metaFields(
	nameField(true),
	cjdoc.Field{Name: "space", Prompt: "Space name", Type: cjdoc.TypeString, Required: true, Regex: nameRegex, Immutable: true},
	cjdoc.Field{Name: "path", Prompt: "Folder inside the space (empty: all of it)", Type: cjdoc.TypeString, Regex: pathRegex, RegexHint: pathHint, Default: ""},
), Polymorphic: map[string][]cjdoc.Field{
	"nfs": {
		{Name: "clients", Prompt: "Clients (hosts, networks, *)", Type: cjdoc.TypeList, Default: []any{"*"}},
		{Name: "options", Prompt: "Export options", Type: cjdoc.TypeString, Regex: optionsRegex, Default: "rw,sync,no_subtree_check"},
	},
	"cifs": {
		{Name: "read_only", Prompt: "Read only", Type: cjdoc.TypeBoolean, Default: false},
		{Name: "valid_users", Prompt: "Users allowed (empty: all)", Type: cjdoc.TypeList, Default: []any{}},
	},
	"gpfsnative": nil,
}}

// resources lists the API's collections in billboard order.
var resources = []*resource{
	{
		name: models.CJDatastores, prompt: "Datastores (the site's storage pools; read-only)", readOnly: true,
		schema: cjdoc.Schema{Type: models.CJDatastores, Fields: []cjdoc.Field{
			{Name: "name", Prompt: "Name"},
			{Name: "filesystem", Prompt: "Filesystem"},
			{Name: "capacity", Prompt: "Capacity in bytes"},
			{Name: "free_space", Prompt: "Free space in bytes"},
			{Name: "used_space", Prompt: "Used space in bytes"},
		}},
		search: []string{"name", "filesystem"},
	},
	{
		name: models.CJIlmsteps, prompt: "ILM steps (placement and migration rules)",
		schema: cjdoc.Schema{Type: models.CJIlmsteps, Fields: metaFields(
			nameField(true),
			cjdoc.Field{Name: "kind", Prompt: "Kind: placement or migration", Type: cjdoc.TypeString, Required: true, Regex: kindRegex},
			cjdoc.Field{Name: "pool", Prompt: "Target pool", Type: cjdoc.TypeString, Required: true, Regex: poolRegex},
			cjdoc.Field{Name: "rule", Prompt: "Condition (policy WHERE clause)", Type: cjdoc.TypeString, Regex: ruleRegex},
		)},
		search: []string{"name", "kind", "pool", "status"},
		inUse:  usedBy(models.CJProfiles, "ilmsteps", "profile"),
	},
	{
		name: models.CJProfiles, prompt: "Profiles (placement policies of spaces)",
		schema: cjdoc.Schema{Type: models.CJProfiles, Fields: metaFields(
			nameField(true),
			cjdoc.Field{Name: "ilmsteps", Prompt: "ILM step names, in order", Type: cjdoc.TypeList, Default: []any{}},
			cjdoc.Field{Name: "pool", Prompt: "Default pool", Type: cjdoc.TypeString, Regex: poolRegex},
		)},
		search: []string{"name", "pool", "ilmsteps", "status"},
		check:  checkProfile,
		inUse:  usedBy(models.CJSpaces, "profile.name", "space"),
	},
	{
		name: models.CJSpaces, prompt: "Spaces (managed folders)",
		schema: cjdoc.Schema{Type: models.CJSpaces, Fields: metaFields(
			nameField(true),
			cjdoc.Field{Name: "quota", Prompt: "Quota in bytes", Type: cjdoc.TypeInteger},
			cjdoc.Field{Name: "profile", Prompt: "Profile ({\"name\": ...} or its name)"},
			cjdoc.Field{Name: "templates", Prompt: "Template ids", Type: cjdoc.TypeList, Immutable: true, Default: []any{}},
			cjdoc.Field{Name: "exposers", Prompt: "Exposers to create ([{\"name\": ..., \"type\": ...}])", Type: cjdoc.TypeList, Immutable: true},
		)},
		search: []string{"name", "profile.name", "exposers.name", "exposers.type", "status"},
		check:  checkSpace,
		inUse:  spaceInUse,
	},
	{
		name: models.CJTemplates, prompt: "Templates (folder structures for new spaces)",
		schema: cjdoc.Schema{Type: models.CJTemplates, Fields: metaFields(
			nameField(false),
			cjdoc.Field{Name: "directories", Prompt: "Folders to create, relative to the space", Type: cjdoc.TypeList, Default: []any{}},
		)},
		search: []string{"name", "status"},
		check:  checkTemplate,
	},
	{
		name: models.CJExposers, prompt: "Exposers (NFS exports, SMB shares, GPFS native access)",
		schema: exposerSchema,
		search: []string{"name", "type", "space", "status"},
		check:  checkExposer,
	},
	{
		name: models.CJSnapshots, prompt: "Snapshots (read-only copies of spaces)",
		schema: cjdoc.Schema{Type: models.CJSnapshots, Fields: metaFields(
			nameField(true),
			cjdoc.Field{Name: "space", Prompt: "Space name", Type: cjdoc.TypeString, Required: true, Regex: nameRegex, Immutable: true},
		)},
		search: []string{"name", "space", "status"},
		check:  checkSnapshot,
		scope:  func(doc map[string]any) string { s, _ := doc["space"].(string); return s },
	},
}

// resourceByName finds a collection.
func resourceByName(name string) *resource {
	for _, r := range resources {
		if r.name == name {
			return r
		}
	}
	return nil
}

// schemaFor returns the schema an item is checked and rendered against: the
// variant of its type for a polymorphic collection.
func (r *resource) schemaFor(it *models.CJItem) cjdoc.Schema {
	if r.schema.IsPolymorphic() {
		typ, _ := it.Data[cjdoc.Discriminator].(string)
		if v, ok := r.schema.Variant(typ); ok {
			return v
		}
	}
	return r.schema
}

// validator collects the field errors of a write's database checks.
type validator struct {
	ctx  context.Context
	db   bun.IDB
	site string
	// lock: the checks run in the write's transaction, and the items
	// they find stay locked until it ends (models.FindCJItemForUpdate).
	lock bool
	errs []cjdoc.FieldError
}

func (v *validator) fail(field, format string, args ...any) {
	v.errs = append(v.errs, cjdoc.FieldError{Name: field, Message: fmt.Sprintf(format, args...)})
}

// err returns the collected errors as a 422, or nil.
func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return &cjdoc.ValidationError{Fields: v.errs}
}

// exists reports whether a visible item of typ is named name.
func (v *validator) exists(typ, scope, name string) (bool, error) {
	find := models.FindCJItem
	if v.lock {
		find = models.FindCJItemForUpdate
	}
	_, err := find(v.ctx, v.db, v.site, typ, scope, name)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// stringList checks that doc[field], if sent, is a list of strings matching
// re and returns it.
func (v *validator) stringList(doc map[string]any, field string, re interface{ MatchString(string) bool }, what string) []string {
	raw, ok := doc[field].([]any)
	if !ok {
		return nil
	}
	if len(raw) > maxListLen {
		v.fail(field, "has more than %d elements", maxListLen)
		return nil
	}
	out := make([]string, 0, len(raw))
	for i, e := range raw {
		s, ok := e.(string)
		if !ok || !re.MatchString(s) {
			v.fail(field, "element %d must be %s", i, what)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// relPath checks a folder path relative to a space: it may not be absolute
// in effect, climb out with .., or reach the hub's private folder.
func relPath(p string) (string, string) {
	if len(p) > maxPathLen {
		return "", fmt.Sprintf("is longer than %d bytes", maxPathLen)
	}
	if strings.ContainsAny(p, "\x00\r\n") {
		return "", "may not hold NUL or line breaks"
	}
	clean := path.Clean("/" + p)
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", "may not contain .."
		}
	}
	return strings.TrimPrefix(clean, "/"), ""
}

func checkTemplate(v *validator, doc map[string]any, _ *models.CJItem) error {
	raw, ok := doc["directories"].([]any)
	if !ok {
		return nil
	}
	if len(raw) > maxListLen {
		v.fail("directories", "has more than %d elements", maxListLen)
		return nil
	}
	dirs := make([]any, 0, len(raw))
	for i, e := range raw {
		s, ok := e.(string)
		if !ok {
			v.fail("directories", "element %d must be a relative folder path", i)
			return nil
		}
		clean, msg := relPath(s)
		if msg == "" && clean == "" {
			msg = "names the space itself"
		}
		if msg != "" {
			v.fail("directories", "element %d (%q) %s", i, s, msg)
			return nil
		}
		dirs = append(dirs, clean)
	}
	doc["directories"] = dirs
	return nil
}

func checkProfile(v *validator, doc map[string]any, _ *models.CJItem) error {
	names := v.stringList(doc, "ilmsteps", nameRE, "an ilmstep name")
	// In name order: the check inside the write's transaction locks each
	// on PostgreSQL, and two writes locking the same rows in two orders
	// could deadlock.
	for _, n := range slices.Sorted(slices.Values(names)) {
		ok, err := v.exists(models.CJIlmsteps, "", n)
		if err != nil {
			return err
		}
		if !ok {
			v.fail("ilmsteps", "no ilmstep is named %q", n)
		}
	}
	return nil
}

func checkSpace(v *validator, doc map[string]any, _ *models.CJItem) error {
	if q, ok := doc["quota"].(int64); ok && q < 0 {
		v.fail("quota", "must be 0 or more bytes")
	}
	if p, sent := doc["profile"]; sent && p != nil {
		name, _ := p.(string)
		if m, isObj := p.(map[string]any); isObj {
			name, _ = m["name"].(string)
		}
		if !nameRE.MatchString(name) {
			v.fail("profile", `must be a profile name or {"name": <profile name>}`)
		} else if ok, err := v.exists(models.CJProfiles, "", name); err != nil {
			return err
		} else if !ok {
			v.fail("profile", "no profile is named %q", name)
		} else {
			doc["profile"] = map[string]any{"name": name}
		}
	}
	if raw, ok := doc["templates"].([]any); ok {
		ids := make([]any, 0, len(raw))
		for i, e := range raw {
			id, isInt := asInt(e)
			if !isInt {
				v.fail("templates", "element %d must be a template id", i)
				continue
			}
			if _, err := models.GetCJItem(v.ctx, v.db, v.site, models.CJTemplates, id); errors.Is(err, models.ErrNotFound) {
				v.fail("templates", "no template has id %d", id)
			} else if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		doc["templates"] = ids
	}
	if raw, ok := doc["exposers"].([]any); ok {
		variants := exposerSchema.Variants()
		var seen []string
		for i, e := range raw {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			typ, _ := m["type"].(string)
			switch {
			case m == nil || len(m) != 2 || !nameRE.MatchString(name) || !slices.Contains(variants, typ):
				v.fail("exposers", `element %d must be {"name": <name>, "type": <%s>}`, i, strings.Join(variants, "|"))
				continue
			case slices.Contains(seen, name):
				v.fail("exposers", "names exposer %q twice", name)
				continue
			}
			seen = append(seen, name)
			taken, err := v.exists(models.CJExposers, "", name)
			if err != nil {
				return err
			}
			if taken {
				v.fail("exposers", "an exposer is already named %q", name)
			}
		}
	}
	return nil
}

func checkExposer(v *validator, doc map[string]any, cur *models.CJItem) error {
	if cur == nil {
		space, _ := doc["space"].(string)
		if ok, err := v.exists(models.CJSpaces, "", space); err != nil {
			return err
		} else if !ok && nameRE.MatchString(space) {
			v.fail("space", "no space is named %q", space)
		}
	}
	if p, ok := doc["path"].(string); ok {
		clean, msg := relPath(p)
		if msg != "" {
			v.fail("path", "%s", msg)
		} else {
			doc["path"] = clean
		}
	}
	if raw, ok := doc["clients"].([]any); ok {
		checkNFSClients(v, raw)
	}
	v.stringList(doc, "valid_users", userRegex, "a user name")
	return nil
}

// checkNFSClients checks an nfs exposer's clients: each one what
// exports(5) allows (vocab.NFSClientError), since each is written into
// the site's exports file as it is.
func checkNFSClients(v *validator, raw []any) {
	if len(raw) > maxListLen {
		v.fail("clients", "has more than %d elements", maxListLen)
		return
	}
	for i, e := range raw {
		s, ok := e.(string)
		if !ok {
			v.fail("clients", "element %d must be a string", i)
			return
		}
		if msg := vocab.NFSClientError(s); msg != "" {
			v.fail("clients", "element %d (%q) %s", i, s, msg)
			return
		}
	}
}

func checkSnapshot(v *validator, doc map[string]any, cur *models.CJItem) error {
	if cur != nil {
		return nil
	}
	// The site's snapshot schedules name theirs scheduled-<time> and their
	// retention removes any snapshot so named: a C+J snapshot never is.
	if name, _ := doc["name"].(string); strings.HasPrefix(name, reservedSnapshotPrefix) {
		v.fail("name", "names starting with %q are reserved for scheduled snapshots", reservedSnapshotPrefix)
	}
	space, _ := doc["space"].(string)
	if ok, err := v.exists(models.CJSpaces, "", space); err != nil {
		return err
	} else if !ok && nameRE.MatchString(space) {
		v.fail("space", "no space is named %q", space)
	}
	if name, _ := doc["name"].(string); len(name)+len(space) > maxSnapshotNames {
		v.fail("name", "is, with its space's name, more than %d bytes: a removed snapshot's copy waits in the site trash as snapshot.<space>.<name>.<time>, which must fit a file name", maxSnapshotNames)
	}
	return nil
}

// maxSnapshotNames bounds a snapshot's and its space's names together: the
// site trash's entry snapshot.<space>.<name>.<19-digit time> must fit the
// 255 bytes of a file name (removals of longer ones failed for ever).
const maxSnapshotNames = 255 - len("snapshot...") - 19

// reservedSnapshotPrefix starts the names of the snapshots a space's
// snapshot schedule takes (site.ScheduledSnapshotName).
const reservedSnapshotPrefix = "scheduled-"

// usedBy returns an inUse check: the items of typ whose field (dotted, or
// a list of names) names the item.
func usedBy(typ, field, what string) func(context.Context, bun.IDB, string, *models.CJItem) (string, error) {
	return func(ctx context.Context, db bun.IDB, site string, it *models.CJItem) (string, error) {
		items, err := models.ListCJItems(ctx, db, site, typ, true)
		if err != nil {
			return "", err
		}
		f, err := cjdoc.ParseWhere(fmt.Sprintf(`{%q: %q}`, field, it.Name))
		if err != nil {
			return "", err
		}
		for _, o := range items {
			if f.Match(o.Data) {
				return fmt.Sprintf("%s %q (id %d) uses it", what, o.Name, o.ID), nil
			}
		}
		return "", nil
	}
}

// spaceInUse: a space's exposers and snapshots go first, so that deleting
// a space never leaves exports of a missing folder or orphan snapshots.
func spaceInUse(ctx context.Context, db bun.IDB, site string, it *models.CJItem) (string, error) {
	for _, typ := range []string{models.CJExposers, models.CJSnapshots} {
		what := strings.TrimSuffix(typ, "s")
		if msg, err := usedBy(typ, "space", what)(ctx, db, site, it); msg != "" || err != nil {
			return msg, err
		}
	}
	return "", nil
}

func mustRegex(s string) *regexp.Regexp { return regexp.MustCompile(s) }

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}
