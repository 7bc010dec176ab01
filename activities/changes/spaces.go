package changes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

type SpaceSiteInput struct {
	Name  *string  `json:"name"`
	Label *string  `json:"label"`
	Usage *[]int64 `json:"usage"`
}

type SnapshotScheduleInput struct {
	Duration  *string `json:"duration"`
	Frequency *string `json:"frequency"`
	Time      *string `json:"time"`
}

// SpaceInput is the writable part of a space; mountpoint is read only
// after creation and ignored on PATCH.
type SpaceInput struct {
	Name             *string                         `json:"name"`
	Mountpoint       *string                         `json:"mountpoint"`
	Size             Nullable[int64]                 `json:"size"`
	PermissionMode   *string                         `json:"permission_mode"`
	Color            *[]int64                        `json:"color"`
	Immutable        *bool                           `json:"immutable"`
	OnSites          *map[string]any                 `json:"on_sites"`
	Sites            *[]SpaceSiteInput               `json:"sites"`
	SnapshotSchedule Nullable[SnapshotScheduleInput] `json:"snapshot_schedule"`
	// Profile is the storage-management (C+J) profile of a space at
	// /spaces/<name>, kept on its C+J items (docs/spaces-one-object.md).
	Profile Nullable[string] `json:"profile"`
}

var errImmutableSpace = models.Refusef("This space is immutable: it cannot be updated or deleted.")

// checkMountpoint validates a space mountpoint: an absolute, clean path
// below the site root, outside the hub's private folder.
func checkMountpoint(m string) string {
	switch {
	case m == "":
		return msgRequired
	case !strings.HasPrefix(m, "/"):
		return "Must be an absolute path, e.g. /spaces/projects."
	case m == "/":
		return "The site root itself cannot be a space."
	case path.Clean(m) != m || strings.Contains(m, "\x00"):
		return "Must be a clean path: no '.', '..', '//' or trailing '/'."
	case m == "/.hub" || strings.HasPrefix(m, "/.hub/"):
		return "/.hub is reserved for the hub."
	case m == "/.snapshots" || strings.HasPrefix(m, "/.snapshots/"):
		// Shared, it would show every space's snapshots, and let users
		// plant folders the snapshot retention removes.
		return "/.snapshots is reserved for the snapshots of the site's spaces."
	case len(m) > 4096:
		return "Ensure this field has no more than 4096 characters."
	}
	return ""
}

// nested reports whether one mountpoint is inside the other.
func nested(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// spaceWrite is what a valid space input changes beside the record: the
// schedule (nil: unchanged), the site links (nil: unchanged) and the C+J
// profile (nil: unchanged, "": none).
type spaceWrite struct {
	sched   *models.SnapshotSchedule
	links   []models.SpaceLink
	profile *string
}

// apply validates in onto sp and returns what else to save.
func (in *SpaceInput) apply(ctx context.Context, db bun.IDB, sp *models.Space, create bool) (spaceWrite, error) {
	v := models.FieldErrors{}
	if in.Name != nil || create {
		if err := CheckName(ctx, db, v, (*models.Space)(nil), deref(in.Name), sp.Name, "A space with this name already exists.", nil, ""); err != nil {
			return spaceWrite{}, err
		}
		sp.Name = deref(in.Name)
	}
	if create {
		m := deref(in.Mountpoint)
		if msg := checkMountpoint(m); msg != "" {
			v.Add("mountpoint", msg)
		} else {
			var others []string
			if err := db.NewSelect().Model((*models.Space)(nil)).Column("mountpoint").Scan(ctx, &others); err != nil {
				return spaceWrite{}, err
			}
			for _, o := range others {
				if nested(m, o) {
					v.Add("mountpoint", fmt.Sprintf("Overlaps the mountpoint %s of another space.", o))
					break
				}
			}
		}
		sp.Mountpoint = m
	}
	if in.Size.Set {
		sp.Size = in.Size.Value()
		CheckNotNeg(v, "size", sp.Size)
	}
	setIf(&sp.PermissionMode, in.PermissionMode)
	if in.Color != nil {
		CheckColor(v, "color", *in.Color)
		sp.Color = append([]int64{}, *in.Color...)
	}
	setIf(&sp.Immutable, in.Immutable)
	if in.OnSites != nil {
		sp.OnSites = nonNil(*in.OnSites)
	}
	var sched *models.SnapshotSchedule
	if in.SnapshotSchedule.Set {
		sched = &models.SnapshotSchedule{} // empty Frequency: delete
		if ss := in.SnapshotSchedule.Value(); ss != nil {
			for field, val := range map[string]*string{"duration": ss.Duration, "frequency": ss.Frequency, "time": ss.Time} {
				if strings.TrimSpace(deref(val)) == "" {
					v.Add("snapshot_schedule."+field, msgRequired)
				}
			}
			if t := deref(ss.Time); t != "" && !validTimeOfDay(t) {
				v.Add("snapshot_schedule.time", "Enter a time of day as HH:MM or HH:MM:SS.")
			} else if f := deref(ss.Frequency); f != "" {
				if _, err := SnapshotCron(f, deref(ss.Time)); err != nil {
					v.Add("snapshot_schedule.frequency", "Use hourly, daily, weekly, monthly or a cron line of five fields.")
				}
			}
			if d := deref(ss.Duration); d != "" {
				if _, err := site.ParseAge(d); err != nil {
					v.Add("snapshot_schedule.duration", "A retention such as 7d, 4w, 12h, 6m or 1y: "+err.Error())
				}
			}
			sched = &models.SnapshotSchedule{Duration: deref(ss.Duration), Frequency: deref(ss.Frequency), Time: deref(ss.Time)}
		}
	}
	var links []models.SpaceLink
	if in.Sites != nil {
		links = []models.SpaceLink{}
		seen := map[string]bool{}
		for i, si := range *in.Sites {
			field := "sites[" + strconv.Itoa(i) + "]"
			name, label := deref(si.Name), deref(si.Label)
			if name == "" {
				v.Add(field+".name", msgRequired)
				continue
			}
			if label == "" {
				v.Add(field+".label", msgRequired)
			}
			if seen[name] {
				v.Add(field+".name", "The site "+name+" is listed twice.")
				continue
			}
			seen[name] = true
			site, err := models.GetSiteByName(ctx, db, name)
			if errors.Is(err, models.ErrNotFound) {
				v.Add(field+".name", "Object with name="+name+" does not exist.")
				continue
			} else if err != nil {
				return spaceWrite{}, err
			}
			links = append(links, models.SpaceLink{SiteID: site.ID, Label: label, Usage: deref(si.Usage)})
		}
	}
	w := spaceWrite{sched: sched, links: links}
	if in.Profile.Set {
		var err error
		if w.profile, err = in.checkProfile(ctx, db, v, sp, links); err != nil {
			return w, err
		}
	}
	return w, v.Err()
}

// checkProfile validates a profile sent for sp: only a space at
// /spaces/<name> has one (its C+J items hold it), and the profile must
// exist on each of the space's sites (links when they change).
func (in *SpaceInput) checkProfile(ctx context.Context, db bun.IDB, v models.FieldErrors, sp *models.Space, links []models.SpaceLink) (*string, error) {
	name := ""
	if p := in.Profile.Value(); p != nil {
		name = *p
	}
	if name == "" {
		return &name, nil
	}
	if models.CJSpaceName(sp.Mountpoint) == "" {
		v.Add("profile", "Only a space whose mountpoint is /spaces/<name> (a space of the storage-management API) has a profile.")
		return nil, nil
	}
	var sites []string
	if links != nil {
		for _, l := range links {
			site, err := models.GetSite(ctx, db, l.SiteID)
			if err != nil {
				return nil, err
			}
			sites = append(sites, site.Name)
		}
	} else {
		for _, l := range sp.Links {
			sites = append(sites, l.Site.Name)
		}
	}
	if len(sites) == 0 {
		v.Add("profile", "The space has no site to hold its profile: give it a site first.")
		return nil, nil
	}
	for _, site := range sites {
		if _, err := models.FindCJItem(ctx, db, site, models.CJProfiles, "", name); errors.Is(err, models.ErrNotFound) {
			v.Add("profile", fmt.Sprintf("No profile is named %q on site %s (profiles are made through the storage-management API).", name, site))
			return nil, nil
		} else if err != nil {
			return nil, err
		}
	}
	return &name, nil
}

func validTimeOfDay(s string) bool {
	for _, layout := range []string{"15:04", "15:04:05"} {
		if _, err := time.Parse(layout, s); err == nil {
			return true
		}
	}
	return false
}

// siteJoinsSpace: a site joining a space gets its folder, then its
// shares. The folder of a space at /spaces/<name> is made by its C+J item
// on that site (created or applied again here), so that one workflow per
// site makes and removes it.
func siteJoinsSpace(ctx context.Context, tx *Tx, sp *models.Space, siteName string) ([]workflows.SpaceOp, error) {
	return joinSite(ctx, tx, sp, siteName, nil)
}

func joinSite(ctx context.Context, tx *Tx, sp *models.Space, siteName string, profile *string) ([]workflows.SpaceOp, error) {
	shares, err := spaceShareOps(ctx, tx, sp.ID, siteName)
	if err != nil {
		return nil, err
	}
	if models.CJSpaceName(sp.Mountpoint) != "" {
		full, err := models.GetSpace(ctx, tx, sp.ID, models.SpaceFilter{}) // with its sites
		if err != nil {
			return nil, err
		}
		it, err := models.SyncSpaceCJItem(ctx, tx, full, siteName, profile, true)
		if err != nil {
			return nil, spaceConflict(err)
		}
		return shares, oweItemChange(ctx, tx, it)
	}
	op := workflows.SpaceOp{Site: siteName, Queue: vocab.DefaultQueue, Action: workflows.SpaceCreate, Mountpoint: sp.Mountpoint, Mode: sp.PermissionMode}
	return append([]workflows.SpaceOp{op}, shares...), nil
}

// siteLeavesSpace: a site leaving a space loses its shares, then its
// folder (kept when it holds data). The folder of a space at
// /spaces/<name> goes with its C+J item on that site, which may not go
// while C+J exposers or snapshots use it (409).
func siteLeavesSpace(ctx context.Context, tx *Tx, sp *models.Space, siteName string) ([]workflows.SpaceOp, error) {
	shares, err := spaceShareOps(ctx, tx, sp.ID, siteName)
	if err != nil {
		return nil, err
	}
	it, err := models.DropSpaceCJItem(ctx, tx, sp, siteName)
	if errors.Is(err, models.ErrInUse) {
		return nil, models.Refusef("The site %s cannot leave the space %q while %s use its folder: delete them first.", siteName, sp.Name, InUseDetail(err))
	} else if err != nil {
		return nil, err
	}
	if it != nil {
		return shares, oweItemChange(ctx, tx, it)
	}
	op := workflows.SpaceOp{Site: siteName, Queue: vocab.DefaultQueue, Action: workflows.SpaceRemove, Mountpoint: sp.Mountpoint}
	return append(shares, op), nil
}

// spaceConflict answers a C+J item that cannot be made yet (the folder is
// still being removed) with 409 and the reason.
func spaceConflict(err error) error {
	if errors.Is(err, models.ErrConflict) {
		return models.Refusef("%s.", strings.TrimPrefix(err.Error(), models.ErrConflict.Error()+": "))
	}
	return err
}

// oweCJChange commits, with the space's change, the change of its C+J
// item it (nil: none) for the item's workflow, as the C+J API does.
func oweItemChange(ctx context.Context, tx *Tx, it *models.CJItem) error {
	if it == nil {
		return nil
	}
	return oweCJChange(ctx, tx, it)
}

// OweSpaceOps commits ops for the space's workflow with the change that
// needs them (KindSpaceOps).
func OweSpaceOps(ctx context.Context, tx *Tx, spaceID int64, ops []workflows.SpaceOp) error {
	if len(ops) == 0 {
		return nil
	}
	return tx.Owe(ctx, KindSpaceOps, spaceID, workflows.SpaceOps{Ops: ops})
}

func ShareOp(siteName, kind string, id int64) workflows.SpaceOp {
	return workflows.SpaceOp{Site: siteName, Queue: vocab.DefaultQueue, Action: workflows.ShareSync,
		Share: workflows.ShareRef{Kind: kind, ID: id, Site: siteName}}
}

// spaceShareOps brings every share of a space up to date on one site: for
// a site joining (or leaving) the space.
func spaceShareOps(ctx context.Context, db bun.IDB, spaceID int64, siteName string) ([]workflows.SpaceOp, error) {
	nfs, err := models.NFSShares(ctx, db, &spaceID)
	if err != nil {
		return nil, err
	}
	smb, err := models.SMBShares(ctx, db, &spaceID)
	if err != nil {
		return nil, err
	}
	var ops []workflows.SpaceOp
	for _, sh := range nfs {
		ops = append(ops, ShareOp(siteName, site.ShareNFS, sh.ID))
	}
	for _, sh := range smb {
		ops = append(ops, ShareOp(siteName, site.ShareSMB, sh.ID))
	}
	return ops, nil
}

// SaveSpace creates (id 0) or updates space id from in, then has the
// SpaceWorkflow make its folder on every site where it is not ready yet
// (so saving again retries a failed site) and remove it, if empty, from
// the sites taken away.
func (s *Service) SaveSpace(ctx context.Context, id int64, in SpaceInput) (*models.Space, error) {
	create := id == 0
	var sp *models.Space
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		sp = &models.Space{Color: []int64{}, OnSites: map[string]any{}}
		if !create {
			var err error
			if sp, err = models.GetSpace(ctx, tx, id, models.SpaceFilter{}); err != nil {
				return err
			}
			if sp.Immutable {
				return errImmutableSpace
			}
		}
		w, err := in.apply(ctx, tx, sp, create)
		if err != nil {
			return err
		}
		if create && w.links == nil {
			w.links = []models.SpaceLink{}
		}
		change, err := models.SaveSpace(ctx, tx, sp, w.sched, w.links)
		if err != nil {
			return err
		}
		if w.sched != nil { // the snapshot schedule changed
			if err := tx.OweScheduleSync(ctx, sp.ID, workflows.SnapshotTemporalID(sp.ID)); err != nil {
				return err
			}
		}
		if sp, err = models.GetSpace(ctx, tx, sp.ID, models.SpaceFilter{}); err != nil {
			return err
		}
		var ops []workflows.SpaceOp
		for _, site := range change.Removed {
			leave, err := siteLeavesSpace(ctx, tx, sp, site.Name)
			if err != nil {
				return err
			}
			ops = append(ops, leave...)
		}
		for _, l := range sp.Links {
			if l.State != vocab.SpaceSiteReady {
				join, err := joinSite(ctx, tx, sp, l.Site.Name, w.profile)
				if err != nil {
					return err
				}
				ops = append(ops, join...)
				continue
			}
			// A ready site: its C+J item takes the new size or profile.
			it, err := models.SyncSpaceCJItem(ctx, tx, sp, l.Site.Name, w.profile, false)
			if err != nil {
				return spaceConflict(err)
			}
			if err := oweItemChange(ctx, tx, it); err != nil {
				return err
			}
		}
		return OweSpaceOps(ctx, tx, sp.ID, ops)
	})
	return sp, err
}

// DeleteSpace deletes space id at once; its SpaceWorkflow then removes
// the folder from each site only where it is empty.
func (s *Service) DeleteSpace(ctx context.Context, id int64) error {
	sp, err := models.GetSpace(ctx, s.DB, id, models.SpaceFilter{})
	if err != nil {
		return err
	}
	if sp.Immutable {
		return errImmutableSpace
	}
	err = s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		sp, items, err := models.DeleteSpace(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := tx.OweScheduleSync(ctx, sp.ID, workflows.SnapshotTemporalID(sp.ID)); err != nil {
			return err
		}
		// A site with a C+J item has its folder removed by the item's
		// deletion, and only by it: the folder is handled once.
		byCJ := map[string]bool{}
		for _, it := range items {
			byCJ[it.Site] = true
			if err := oweItemChange(ctx, tx, it); err != nil {
				return err
			}
		}
		var ops []workflows.SpaceOp
		for _, l := range sp.Links {
			if !byCJ[l.Site.Name] {
				ops = append(ops, workflows.SpaceOp{Site: l.Site.Name, Queue: vocab.DefaultQueue, Action: workflows.SpaceRemove, Mountpoint: sp.Mountpoint})
			}
		}
		return OweSpaceOps(ctx, tx, sp.ID, ops)
	})
	if errors.Is(err, models.ErrInUse) {
		return models.Refusef("This space cannot be deleted while %s: remove that first; its folder is kept.", strings.TrimPrefix(InUseDetail(err), "it has "))
	}
	return err
}
