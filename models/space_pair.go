package models

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/workflows/vocab"
)

// One space, two APIs (docs/spaces-one-object.md). A hub API space whose
// mountpoint is /spaces/<name> and the storage-management (C+J) space item
// <name> of each of its sites are one object kept in two tables: every
// write through either API changes both in the same transaction, so
// neither can see the other's space without its own. The key that pairs
// them is the folder, (site, /spaces/<name>), never a stored id, so
// records written before the pairing existed pair up by themselves.

// ErrImmutableSpace means a write through the C+J API would change or
// delete a space the hub API marks immutable.
var ErrImmutableSpace = errors.New("the space is immutable")

// cjSpacesFolder is where the C+J API keeps its spaces inside a site root.
const cjSpacesFolder = "/spaces/"

// cjNameRE is the C+J API's rule for names (they become file names).
var cjNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,150}$`)

// CJSpaceName returns the name of the C+J space whose folder is
// mountpoint, "" when mountpoint is not such a folder.
func CJSpaceName(mountpoint string) string {
	name, ok := strings.CutPrefix(mountpoint, cjSpacesFolder)
	if !ok || !cjNameRE.MatchString(name) {
		return ""
	}
	return name
}

// CJSpaceMountpoint is the mountpoint of the C+J space name.
func CJSpaceMountpoint(name string) string { return cjSpacesFolder + name }

// SpaceByMountpoint loads the space (with its sites) whose mountpoint is m.
func SpaceByMountpoint(ctx context.Context, db bun.IDB, m string) (*Space, error) {
	sp := new(Space)
	err := spaceRelations(db.NewSelect().Model(sp)).Where("sp.mountpoint = ?", m).Scan(ctx)
	return sp, dbErr(err)
}

// SpaceHubUsers names what of the hub API still uses a space, its folder
// included: NFS and SMB shares, schedules naming it, policies listing it.
// "" when nothing does.
func SpaceHubUsers(ctx context.Context, db bun.IDB, spaceID int64) (string, error) {
	var parts []string
	for _, c := range []struct {
		model any
		what  string
	}{{(*NFSShare)(nil), "NFS share"}, {(*SMBShare)(nil), "SMB share"}, {(*Schedule)(nil), "schedule"}} {
		n, err := db.NewSelect().Model(c.model).Where("space_id = ?", spaceID).Count(ctx)
		if err != nil {
			return "", dbErr(err)
		}
		if n > 0 {
			parts = append(parts, plural(int(n), c.what))
		}
	}
	var pols []Policy
	if err := db.NewSelect().Model(&pols).Column("id", "spaces").Scan(ctx); err != nil {
		return "", dbErr(err)
	}
	n := 0
	for _, p := range pols {
		if slices.Contains(p.Spaces, spaceID) {
			n++
		}
	}
	if n > 0 {
		parts = append(parts, plural(n, "policy"))
	}
	return strings.Join(parts, ", "), nil
}

// SpaceCJUsers names the C+J exposers and snapshots of the C+J space
// name on site, those being deleted included. "" when there are none.
func SpaceCJUsers(ctx context.Context, db bun.IDB, site, name string) (string, error) {
	var parts []string
	for _, typ := range []string{CJExposers, CJSnapshots} {
		items, err := ListCJItems(ctx, db, site, typ, true)
		if err != nil {
			return "", err
		}
		var names []string
		for _, it := range items {
			if s, _ := it.Data["space"].(string); s == name {
				names = append(names, it.Name)
			}
		}
		if len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s (%s)", plural(len(names), strings.TrimSuffix(typ, "s")), strings.Join(names, ", ")))
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	return strings.Join(parts, " and ") + " on site " + site, nil
}

func plural(n int, what string) string {
	switch {
	case n == 1:
		return "1 " + what
	case strings.HasSuffix(what, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// CJQuota reads a space item's quota as stored (nil: none).
func CJQuota(it *CJItem) *int64 {
	switch n := it.Data["quota"].(type) {
	case int64:
		return &n
	case int:
		q := int64(n)
		return &q
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			q := int64(n)
			return &q
		}
	}
	return nil
}

// CJProfile reads a space item's profile name ("" when none).
func CJProfile(it *CJItem) string {
	if m, ok := it.Data["profile"].(map[string]any); ok {
		s, _ := m["name"].(string)
		return s
	}
	return ""
}

func sameQuota(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// setCJSpaceFields writes quota and profile into a space item's data.
func setCJSpaceFields(it *CJItem, quota *int64, profile string) {
	if quota == nil {
		delete(it.Data, "quota")
	} else {
		it.Data["quota"] = *quota
	}
	if profile == "" {
		delete(it.Data, "profile")
	} else {
		it.Data["profile"] = map[string]any{"name": profile}
	}
}

// SpaceProfile returns the profile of a space: that of its C+J items
// (kept equal on every site), "" when it has none or is not a C+J space.
func SpaceProfile(ctx context.Context, db bun.IDB, sp *Space) (string, error) {
	name := CJSpaceName(sp.Mountpoint)
	if name == "" {
		return "", nil
	}
	for _, l := range sp.Links {
		if l.Site == nil {
			continue
		}
		it, err := FindCJItem(ctx, db, l.Site.Name, CJSpaces, "", name)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return "", err
		}
		return CJProfile(it), nil
	}
	return "", nil
}

// SyncSpaceCJItem makes the C+J item of a hub space on site match the
// space: created (NEW) when missing, updated to the space's size and
// profile (profile nil: keep the items' own) when they differ or when
// touch asks for the change to be applied again. It returns the item
// when it changed (the caller owes its change), nil otherwise. A space
// whose folder is not /spaces/<name> has no item. An item of that name
// still being deleted on site is ErrConflict: the folder is on its way out.
func SyncSpaceCJItem(ctx context.Context, db bun.IDB, sp *Space, site string, profile *string, touch bool) (*CJItem, error) {
	name := CJSpaceName(sp.Mountpoint)
	if name == "" {
		return nil, nil
	}
	it, err := FindCJItem(ctx, db, site, CJSpaces, "", name)
	if errors.Is(err, ErrNotFound) {
		all, err := ListCJItems(ctx, db, site, CJSpaces, true)
		if err != nil {
			return nil, err
		}
		for _, o := range all {
			if o.Name == name {
				return nil, fmt.Errorf("%w: the folder %s is still being removed from site %s; try again once it is gone", ErrConflict, sp.Mountpoint, site)
			}
		}
		want := ""
		if profile != nil {
			want = *profile
		} else if want, err = SpaceProfile(ctx, db, sp); err != nil {
			return nil, err
		}
		it = &CJItem{Site: site, Type: CJSpaces, Name: name, Data: map[string]any{"name": name, "templates": []any{}}}
		setCJSpaceFields(it, sp.Size, want)
		return it, CreateCJItem(ctx, db, it)
	} else if err != nil {
		return nil, err
	}
	want := CJProfile(it)
	if profile != nil {
		want = *profile
	}
	if !touch && sameQuota(CJQuota(it), sp.Size) && want == CJProfile(it) {
		return nil, nil
	}
	setCJSpaceFields(it, sp.Size, want)
	return it, UpdateCJItem(ctx, db, it, it.Etag)
}

// DropSpaceCJItem marks the C+J item of a hub space on site deleted (the
// site leaves the space, or the space goes) and returns it; nil when there
// is none. Its exposers and snapshots still using the folder are ErrInUse.
func DropSpaceCJItem(ctx context.Context, db bun.IDB, sp *Space, site string) (*CJItem, error) {
	name := CJSpaceName(sp.Mountpoint)
	if name == "" {
		return nil, nil
	}
	// The item's row is locked before its users are listed: a C+J
	// exposer or snapshot created at the same moment locks it too
	// (FindCJItemForUpdate), so it either committed before and is listed
	// here, or finds the space gone.
	it, err := FindCJItemForUpdate(ctx, db, site, CJSpaces, "", name)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	users, err := SpaceCJUsers(ctx, db, site, name)
	if err != nil {
		return nil, err
	}
	if users != "" {
		return nil, fmt.Errorf("%w: %s", ErrInUse, users)
	}
	// The hub API keeps a folder holding data where it is (the C+J API
	// moves it to the site's trash): the deletion says which.
	it.Data[CJKeepFolder] = true
	if _, err := db.NewUpdate().Model(it).Column("data").WherePK().Exec(ctx); err != nil {
		return nil, dbErr(err)
	}
	return it, MarkCJItemDeleted(ctx, db, it, it.Etag)
}

// CJKeepFolder is the data key of a space item deleted through the hub
// API: its folder is removed only when empty and otherwise kept in place,
// as the hub API promises, rather than moved to the trash.
const CJKeepFolder = "_keep_folder"

// CJSpaceChange is what a write of a C+J space item did to the hub side:
// the hub space (nil when none is left), whether it was deleted, and the
// space items of its other sites brought to the same quota and profile
// (the caller owes their changes).
type CJSpaceChange struct {
	Space    *Space
	Deleted  bool
	Siblings []*CJItem
}

// JoinHubSpace makes the hub space of a C+J space item (being created, or
// visible again after its deletion failed) hold the item's site: the hub
// space whose mountpoint is /spaces/<name> gains the site, or is created
// (named <name>). When the item has a quota or profile, the hub space and
// the items of its other sites take them; when it has neither, the item
// takes the hub space's (it.Data is changed; the caller stores it). A hub
// space named <name> with another folder, or a mountpoint overlapping
// /spaces/<name>, is ErrConflict; an immutable hub space ErrImmutableSpace.
func JoinHubSpace(ctx context.Context, db bun.IDB, it *CJItem) (CJSpaceChange, error) {
	sp, created, err := linkHubSpace(ctx, db, it)
	if err != nil || created || sp == nil {
		return CJSpaceChange{Space: sp}, err
	}
	var out CJSpaceChange
	if sp.Immutable {
		return out, fmt.Errorf("%w: the hub API space %q (id %d) is immutable", ErrImmutableSpace, sp.Name, sp.ID)
	}
	if CJQuota(it) == nil && CJProfile(it) == "" {
		// A bare item adopts the space's quota and profile.
		profile, err := SpaceProfile(ctx, db, sp)
		if err != nil {
			return out, err
		}
		setCJSpaceFields(it, sp.Size, profile)
		out.Space, err = GetSpace(ctx, db, sp.ID, SpaceFilter{})
		return out, err
	}
	return SpreadCJSpace(ctx, db, it)
}

// linkHubSpace links the item's site to the hub space of its folder, or
// creates that space (with the item's quota), and returns it.
func linkHubSpace(ctx context.Context, db bun.IDB, it *CJItem) (*Space, bool, error) {
	site, err := GetSiteByName(ctx, db, it.Site)
	if errors.Is(err, ErrNotFound) {
		// A C+J API configured for a site the hub has no record of
		// (HUB_CJ_SITE): no hub API space can name that site.
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("site %s: %w", it.Site, err)
	}
	m := CJSpaceMountpoint(it.Name)
	sp, err := SpaceByMountpoint(ctx, db, m)
	if errors.Is(err, ErrNotFound) {
		if err := checkNewCJSpace(ctx, db, it.Name, m); err != nil {
			return nil, false, err
		}
		sp = &Space{Name: it.Name, Mountpoint: m, Size: CJQuota(it), Color: []int64{}, OnSites: map[string]any{}}
		if _, err := SaveSpace(ctx, db, sp, nil, []SpaceLink{{SiteID: site.ID, Label: site.Label}}); err != nil {
			return nil, false, err
		}
		sp, err = GetSpace(ctx, db, sp.ID, SpaceFilter{})
		return sp, true, err
	} else if err != nil {
		return nil, false, err
	}
	if !slices.ContainsFunc(sp.Links, func(l SpaceSite) bool { return l.SiteID == site.ID }) {
		link := &SpaceSite{SpaceID: sp.ID, SiteID: site.ID, Label: site.Label, Usage: []int64{}, State: vocab.SpaceSitePending}
		if _, err := db.NewInsert().Model(link).Exec(ctx); err != nil {
			return nil, false, dbErr(err)
		}
		if sp, err = GetSpace(ctx, db, sp.ID, SpaceFilter{}); err != nil {
			return nil, false, err
		}
	}
	return sp, false, nil
}

// RelinkHubSpace is linkHubSpace for an item whose deletion failed and
// which is visible again: its hub side comes back with it (a hub space
// deleted meanwhile is made again, named after the item; a name taken
// since gets the suffix "-restored"), so neither API shows the folder
// without the other.
func RelinkHubSpace(ctx context.Context, db bun.IDB, it *CJItem) error {
	_, _, err := linkHubSpace(ctx, db, it)
	if errors.Is(err, ErrConflict) {
		renamed := *it
		renamed.Name = it.Name + "-restored"
		if sp, err2 := SpaceByMountpoint(ctx, db, CJSpaceMountpoint(it.Name)); err2 == nil {
			return fmt.Errorf("relink %s: %w", sp.Name, err)
		}
		sp := &Space{Name: renamed.Name, Mountpoint: CJSpaceMountpoint(it.Name), Size: CJQuota(it), Color: []int64{}, OnSites: map[string]any{}}
		site, err := GetSiteByName(ctx, db, it.Site)
		if err != nil {
			return err
		}
		_, err = SaveSpace(ctx, db, sp, nil, []SpaceLink{{SiteID: site.ID, Label: site.Label}})
		return err
	}
	return err
}

// checkNewCJSpace refuses a hub space for a new C+J space whose name or
// folder another hub space already has.
func checkNewCJSpace(ctx context.Context, db bun.IDB, name, m string) error {
	var others []Space
	if err := db.NewSelect().Model(&others).Column("id", "name", "mountpoint").Scan(ctx); err != nil {
		return dbErr(err)
	}
	for _, o := range others {
		switch {
		case o.Name == name:
			return fmt.Errorf("%w: the hub API space %q (id %d) has another folder, %s", ErrConflict, o.Name, o.ID, o.Mountpoint)
		case o.Mountpoint == m || strings.HasPrefix(o.Mountpoint, m+"/") || strings.HasPrefix(m, o.Mountpoint+"/"):
			return fmt.Errorf("%w: the folder %s overlaps the hub API space %q at %s", ErrConflict, m, o.Name, o.Mountpoint)
		}
	}
	return nil
}

// SpreadCJSpace gives the hub space of a C+J space item, and the items of
// its other sites, the item's quota and profile (a PATCH through the C+J
// API). An immutable hub space is ErrImmutableSpace.
func SpreadCJSpace(ctx context.Context, db bun.IDB, it *CJItem) (CJSpaceChange, error) {
	var out CJSpaceChange
	sp, err := SpaceByMountpoint(ctx, db, CJSpaceMountpoint(it.Name))
	if errors.Is(err, ErrNotFound) {
		return out, nil // an item of before the pairing whose hub space was never made
	} else if err != nil {
		return out, err
	}
	if sp.Immutable {
		return out, fmt.Errorf("%w: the hub API space %q (id %d) is immutable", ErrImmutableSpace, sp.Name, sp.ID)
	}
	quota, profile := CJQuota(it), CJProfile(it)
	if !sameQuota(sp.Size, quota) {
		sp.Size = quota
		if _, err := db.NewUpdate().Model(sp).Column("size").WherePK().Exec(ctx); err != nil {
			return out, dbErr(err)
		}
	}
	for _, l := range sp.Links {
		if l.Site == nil || l.Site.Name == it.Site {
			continue
		}
		sib, err := SyncSpaceCJItem(ctx, db, sp, l.Site.Name, &profile, false)
		if err != nil {
			return out, err
		}
		if sib != nil {
			out.Siblings = append(out.Siblings, sib)
		}
	}
	out.Space = sp
	return out, nil
}

// LeaveHubSpace: a C+J space item being deleted takes its site out of its
// hub space, and deletes the hub space when no site is left. What of the
// hub API still uses the space (shares, schedules, policies) is ErrInUse,
// and an immutable hub space ErrImmutableSpace, whichever site is leaving:
// a folder must not go while a record of the other API points at it.
func LeaveHubSpace(ctx context.Context, db bun.IDB, it *CJItem) (CJSpaceChange, error) {
	var out CJSpaceChange
	sp, err := SpaceByMountpoint(ctx, db, CJSpaceMountpoint(it.Name))
	if errors.Is(err, ErrNotFound) {
		return out, nil
	} else if err != nil {
		return out, err
	}
	if sp.Immutable {
		return out, fmt.Errorf("%w: the hub API space %q (id %d) is immutable", ErrImmutableSpace, sp.Name, sp.ID)
	}
	users, err := SpaceHubUsers(ctx, db, sp.ID)
	if err != nil {
		return out, err
	}
	if users != "" {
		return out, fmt.Errorf("%w: the hub API space %q (id %d) has %s", ErrInUse, sp.Name, sp.ID, users)
	}
	out.Space = sp
	rest := 0
	for _, l := range sp.Links {
		if l.Site != nil && l.Site.Name == it.Site {
			if _, err := db.NewDelete().Model((*SpaceSite)(nil)).Where("space_id = ? AND site_id = ?", sp.ID, l.SiteID).Exec(ctx); err != nil {
				return out, dbErr(err)
			}
			continue
		}
		rest++
	}
	if rest > 0 {
		return out, nil
	}
	res, err := db.NewDelete().Model((*Space)(nil)).Where("id = ?", sp.ID).Exec(ctx)
	out.Deleted = true
	return out, deleted(res, err)
}

// RecordCJSpaceSite stores the outcome of a C+J space item's change on its
// hub space's link to the site: the C+J change makes the folder of a
// paired space, so it is the one to say whether it is ready.
func RecordCJSpaceSite(ctx context.Context, db bun.IDB, site, name, state, msg string) error {
	_, err := db.NewUpdate().Model((*SpaceSite)(nil)).Set("state = ?", state).Set("error = ?", msg).
		Where("space_id = (SELECT id FROM spaces WHERE mountpoint = ?)", CJSpaceMountpoint(name)).
		Where("site_id = (SELECT id FROM sites WHERE name = ?)", site).Exec(ctx)
	return dbErr(err)
}
