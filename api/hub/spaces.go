package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

func (s *Server) spaceRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("space")
	r.GET("/spaces/", perm, handle(s.listSpaces))
	r.POST("/spaces/", perm, handle(s.saveSpace))
	r.GET("/spaces/:id/", perm, handle(s.getSpace))
	r.PATCH("/spaces/:id/", perm, handle(s.saveSpace))
	r.DELETE("/spaces/:id/", perm, handle(s.deleteSpace))
	// A site's filesets are its spaces' folders (filesets.go).
	r.GET("/filesets/", auth.CRUD("space"), handle(s.listFilesets))
}

type spaceSiteInput struct {
	Name  *string  `json:"name"`
	Label *string  `json:"label"`
	Usage *[]int64 `json:"usage"`
}

type snapshotScheduleInput struct {
	Duration  *string `json:"duration"`
	Frequency *string `json:"frequency"`
	Time      *string `json:"time"`
}

// spaceInput is the writable part of a space; mountpoint is read only
// after creation and ignored on PATCH.
type spaceInput struct {
	Name             *string                         `json:"name"`
	Mountpoint       *string                         `json:"mountpoint"`
	Size             nullable[int64]                 `json:"size"`
	PermissionMode   *string                         `json:"permission_mode"`
	Color            *[]int64                        `json:"color"`
	Immutable        *bool                           `json:"immutable"`
	OnSites          *map[string]any                 `json:"on_sites"`
	Sites            *[]spaceSiteInput               `json:"sites"`
	SnapshotSchedule nullable[snapshotScheduleInput] `json:"snapshot_schedule"`
	// Profile is the storage-management (C+J) profile of a space at
	// /spaces/<name>, kept on its C+J items (docs/spaces-one-object.md).
	Profile nullable[string] `json:"profile"`
}

var errImmutableSpace = web.Errorf(http.StatusConflict, "This space is immutable: it cannot be updated or deleted.")

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
func (in *spaceInput) apply(ctx context.Context, db bun.IDB, sp *models.Space, create bool) (spaceWrite, error) {
	v := web.ValidationError{}
	if in.Name != nil || create {
		if err := checkUniqueName(ctx, db, v, (*models.Space)(nil), deref(in.Name), sp.Name, "A space with this name already exists.", nil, ""); err != nil {
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
		sp.Size = in.Size.value()
		checkNotNeg(v, "size", sp.Size)
	}
	setIf(&sp.PermissionMode, in.PermissionMode)
	if in.Color != nil {
		checkColor(v, "color", *in.Color)
		sp.Color = append([]int64{}, *in.Color...)
	}
	setIf(&sp.Immutable, in.Immutable)
	if in.OnSites != nil {
		sp.OnSites = nonNilMap(*in.OnSites)
	}
	var sched *models.SnapshotSchedule
	if in.SnapshotSchedule.Set {
		sched = &models.SnapshotSchedule{} // empty Frequency: delete
		if ss := in.SnapshotSchedule.value(); ss != nil {
			for field, val := range map[string]*string{"duration": ss.Duration, "frequency": ss.Frequency, "time": ss.Time} {
				if strings.TrimSpace(deref(val)) == "" {
					v.Add("snapshot_schedule."+field, msgRequired)
				}
			}
			if t := deref(ss.Time); t != "" && !validTimeOfDay(t) {
				v.Add("snapshot_schedule.time", "Enter a time of day as HH:MM or HH:MM:SS.")
			} else if f := deref(ss.Frequency); f != "" {
				if _, err := changes.SnapshotCron(f, deref(ss.Time)); err != nil {
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
			if isNotFound(err) {
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
func (in *spaceInput) checkProfile(ctx context.Context, db bun.IDB, v web.ValidationError, sp *models.Space, links []models.SpaceLink) (*string, error) {
	name := ""
	if p := in.Profile.value(); p != nil {
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
		if _, err := models.FindCJItem(ctx, db, site, models.CJProfiles, "", name); isNotFound(err) {
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

// spaceView holds what rendering spaces needs beyond the rows.
type spaceView struct {
	pools map[int64]string // site id → default pool name
	nfs   map[int64][]models.NFSShare
	smb   map[int64][]models.SMBShare
	// profile is the C+J profile of each space at /spaces/<name> that has one.
	profile map[int64]string
}

func (s *Server) loadSpaceView(ctx context.Context, spaces []models.Space) (*spaceView, error) {
	v := &spaceView{pools: map[int64]string{}, nfs: map[int64][]models.NFSShare{}, smb: map[int64][]models.SMBShare{}, profile: map[int64]string{}}
	var pools []models.StoragePool
	if err := s.DB.NewSelect().Model(&pools).Where("is_default = ?", true).Scan(ctx); err != nil {
		return nil, err
	}
	for _, p := range pools {
		v.pools[p.SiteID] = p.Name
	}
	for _, sp := range spaces {
		nfs, smb, err := models.SpaceShares(ctx, s.DB, sp.ID)
		if err != nil {
			return nil, err
		}
		v.nfs[sp.ID], v.smb[sp.ID] = nfs, smb
		if v.profile[sp.ID], err = models.SpaceProfile(ctx, s.DB, &sp); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *spaceView) render(c *gin.Context, sp *models.Space) spaceResponse {
	sites := make([]spaceSiteResponse, len(sp.Links))
	ready := true
	for i, l := range sp.Links {
		addon := addonDisabled
		if l.Site.AddonEnabled {
			addon = addonEnabled
		}
		usage := l.Usage
		if usage == nil {
			usage = []int64{}
		}
		sites[i] = spaceSiteResponse{ID: strconv.FormatInt(l.SiteID, 10), Name: l.Site.Name, Label: l.Label,
			Pool: v.pools[l.SiteID], Usage: usage, Addon: addon, State: l.State, Error: web.CleanErrorText(l.Error)}
		ready = ready && l.State == vocab.SpaceSiteReady
	}
	shares := []nestedShare{}
	for _, n := range v.nfs[sp.ID] {
		shares = append(shares, nestedShare{ID: n.ID, Type: "nfs", Name: n.Name, Path: n.Path, URL: recordURL(c, "nfsshares", n.ID)})
	}
	for _, m := range v.smb[sp.ID] {
		shares = append(shares, nestedShare{ID: m.ID, Type: "smb", Name: m.Name, Path: m.Path, URL: recordURL(c, "smbshares", m.ID)})
	}
	var sched *snapshotScheduleResponse
	if ss := sp.SnapshotSchedule; ss != nil {
		sched = &snapshotScheduleResponse{ID: ss.ID, Space: sp.ID, Duration: ss.Duration, Frequency: ss.Frequency, Time: ss.Time}
	}
	color := sp.Color
	if color == nil {
		color = []int64{}
	}
	var profile *string
	if p := v.profile[sp.ID]; p != "" {
		profile = &p
	}
	return spaceResponse{
		ID: sp.ID, UUID: sp.UUID, URL: recordURL(c, "spaces", sp.ID), Name: sp.Name, Mountpoint: sp.Mountpoint,
		Size: sp.Size, PermissionMode: sp.PermissionMode, Color: color, Created: sp.Created,
		Editable: auth.Current(c).Can("change_space") && !sp.Immutable, IsReady: ready,
		NestedShares:  shares,
		Relationships: spaceRelationships{Sites: len(sp.Links), NFSShares: len(v.nfs[sp.ID]), SMBShares: len(v.smb[sp.ID])},
		Sites:         sites, Immutable: sp.Immutable, OnSites: nonNilMap(sp.OnSites), SnapshotSchedule: sched,
		Profile: profile,
	}
}

// spaceFilter reads site_id and search_keyword.
func spaceFilter(c *gin.Context) (models.SpaceFilter, error) {
	var f models.SpaceFilter
	id, ok, err := web.QueryInt(c, "site_id")
	if err != nil {
		return f, err
	}
	if ok {
		f.SiteID = &id
	}
	f.Keyword = c.Query("search_keyword")
	return f, nil
}

func (s *Server) listSpaces(c *gin.Context) error {
	f, err := spaceFilter(c)
	if err != nil {
		return err
	}
	page, size, err := web.PageParams(c)
	if err != nil {
		return err
	}
	var spaces []models.Space
	count, err := web.ScanPage(c, models.SpacesQuery(s.DB, &spaces, f), page, size)
	if err != nil {
		return err
	}
	view, err := s.loadSpaceView(c.Request.Context(), spaces)
	if err != nil {
		return err
	}
	out := make([]any, len(spaces))
	for i := range spaces {
		out[i] = view.render(c, &spaces[i])
	}
	return web.WritePage(c, out, count, page, size)
}

func (s *Server) renderOneSpace(c *gin.Context, code int, sp *models.Space) error {
	view, err := s.loadSpaceView(c.Request.Context(), []models.Space{*sp})
	if err != nil {
		return err
	}
	c.JSON(code, view.render(c, sp))
	return nil
}

func (s *Server) getSpace(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	f, err := spaceFilter(c)
	if err != nil {
		return err
	}
	sp, err := models.GetSpace(c.Request.Context(), s.DB, id, f)
	if err != nil {
		return err
	}
	return s.renderOneSpace(c, http.StatusOK, sp)
}

// saveSpace creates (POST) or updates (PATCH) a space, then has the
// SpaceWorkflow create its directory on every site where it is not ready
// yet (so saving again retries a failed site) and remove it, if empty, from
// the sites taken away.
func (s *Server) saveSpace(c *gin.Context) error {
	var in spaceInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var sp *models.Space
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		sp = &models.Space{Color: []int64{}, OnSites: map[string]any{}}
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
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
			if err := oweCJChange(ctx, tx, it); err != nil {
				return err
			}
		}
		return oweSpaceOps(ctx, tx, sp.ID, ops)
	})
	if err != nil {
		return err
	}
	code := http.StatusOK
	if create {
		code = http.StatusCreated
	}
	return s.renderOneSpace(c, code, sp)
}

// deleteSpace deletes the record at once (204); the SpaceWorkflow then
// removes the directory from each site only where it is empty.
func (s *Server) deleteSpace(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	sp, err := models.GetSpace(ctx, s.DB, id, models.SpaceFilter{})
	if err != nil {
		return err
	}
	if sp.Immutable {
		return errImmutableSpace
	}
	err = s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
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
			if err := oweCJChange(ctx, tx, it); err != nil {
				return err
			}
		}
		var ops []workflows.SpaceOp
		for _, l := range sp.Links {
			if !byCJ[l.Site.Name] {
				ops = append(ops, workflows.SpaceOp{Site: l.Site.Name, Queue: vocab.DefaultQueue, Action: workflows.SpaceRemove, Mountpoint: sp.Mountpoint})
			}
		}
		return oweSpaceOps(ctx, tx, sp.ID, ops)
	})
	if errors.Is(err, models.ErrInUse) {
		return web.Errorf(http.StatusConflict, "This space cannot be deleted while %s: remove that first; its folder is kept.", strings.TrimPrefix(inUseDetail(err), "it has "))
	}
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// siteJoinsSpace: a site joining a space gets its folder, then its
// shares. The folder of a space at /spaces/<name> is made by its C+J item
// on that site (created or applied again here), so that one workflow per
// site makes and removes it.
func siteJoinsSpace(ctx context.Context, tx *changes.Tx, sp *models.Space, siteName string) ([]workflows.SpaceOp, error) {
	return joinSite(ctx, tx, sp, siteName, nil)
}

func joinSite(ctx context.Context, tx *changes.Tx, sp *models.Space, siteName string, profile *string) ([]workflows.SpaceOp, error) {
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
		return shares, oweCJChange(ctx, tx, it)
	}
	op := workflows.SpaceOp{Site: siteName, Queue: vocab.DefaultQueue, Action: workflows.SpaceCreate, Mountpoint: sp.Mountpoint, Mode: sp.PermissionMode}
	return append([]workflows.SpaceOp{op}, shares...), nil
}

// siteLeavesSpace: a site leaving a space loses its shares, then its
// folder (kept when it holds data). The folder of a space at
// /spaces/<name> goes with its C+J item on that site, which may not go
// while C+J exposers or snapshots use it (409).
func siteLeavesSpace(ctx context.Context, tx *changes.Tx, sp *models.Space, siteName string) ([]workflows.SpaceOp, error) {
	shares, err := spaceShareOps(ctx, tx, sp.ID, siteName)
	if err != nil {
		return nil, err
	}
	it, err := models.DropSpaceCJItem(ctx, tx, sp, siteName)
	if errors.Is(err, models.ErrInUse) {
		return nil, web.Errorf(http.StatusConflict, "The site %s cannot leave the space %q while %s use its folder: delete them first.", siteName, sp.Name, inUseDetail(err))
	} else if err != nil {
		return nil, err
	}
	if it != nil {
		return shares, oweCJChange(ctx, tx, it)
	}
	op := workflows.SpaceOp{Site: siteName, Queue: vocab.DefaultQueue, Action: workflows.SpaceRemove, Mountpoint: sp.Mountpoint}
	return append(shares, op), nil
}

// spaceConflict answers a C+J item that cannot be made yet (the folder is
// still being removed) with 409 and the reason.
func spaceConflict(err error) error {
	if errors.Is(err, models.ErrConflict) {
		return web.Errorf(http.StatusConflict, "%s.", strings.TrimPrefix(err.Error(), models.ErrConflict.Error()+": "))
	}
	return err
}

// oweCJChange commits, with the space's change, the change of its C+J
// item it (nil: none) for the item's workflow, as the C+J API does.
func oweCJChange(ctx context.Context, tx *changes.Tx, it *models.CJItem) error {
	if it == nil {
		return nil
	}
	return tx.Owe(ctx, changes.KindCJChange, it.ID, changes.CJChange{Site: it.Site, Type: it.Type, Generation: it.Generation})
}

// oweSpaceOps commits ops for the space's workflow with the change that
// needs them (changes.KindSpaceOps).
func oweSpaceOps(ctx context.Context, tx *changes.Tx, spaceID int64, ops []workflows.SpaceOp) error {
	if len(ops) == 0 {
		return nil
	}
	return tx.Owe(ctx, changes.KindSpaceOps, spaceID, workflows.SpaceOps{Ops: ops})
}
