package hub

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// shareRoutes serves the NFS and SMB shares of spaces. The spec does not
// name their paths; /nfsshares/ and /smbshares/ follow the other resources.
// Lists are bare arrays (spec: Common rules 2), filtered by space.
func (s *Server) shareRoutes(r *gin.RouterGroup) {
	nfs := auth.CRUD("nfsshare")
	r.GET("/nfsshares/", nfs, handle(s.listNFSShares))
	r.POST("/nfsshares/", nfs, handle(s.saveNFSShare))
	r.GET("/nfsshares/:id/", nfs, handle(s.getNFSShare))
	r.PATCH("/nfsshares/:id/", nfs, handle(s.saveNFSShare))
	r.DELETE("/nfsshares/:id/", nfs, handle(s.deleteNFSShare))

	smb := auth.CRUD("smbshare")
	r.GET("/smbshares/", smb, handle(s.listSMBShares))
	r.POST("/smbshares/", smb, handle(s.saveSMBShare))
	r.GET("/smbshares/:id/", smb, handle(s.getSMBShare))
	r.PATCH("/smbshares/:id/", smb, handle(s.saveSMBShare))
	r.DELETE("/smbshares/:id/", smb, handle(s.deleteSMBShare))
}

// spaceQueryFilter reads the optional integer query parameter space.
func spaceQueryFilter(c *gin.Context) (*int64, error) {
	id, ok, err := web.QueryInt(c, "space")
	if err != nil || !ok {
		return nil, err
	}
	return &id, nil
}

// shareSpace checks a share's space id and path: the path defaults to the
// space's mountpoint and must lie inside it.
func shareSpace(ctx context.Context, db bun.IDB, v web.ValidationError, spaceID int64, p *string) error {
	sp, err := models.GetSpace(ctx, db, spaceID, models.SpaceFilter{})
	if isNotFound(err) {
		v.Add("space", "Invalid pk \""+strconv.FormatInt(spaceID, 10)+"\" - object does not exist.")
		return nil
	} else if err != nil {
		return err
	}
	if *p == "" {
		*p = sp.Mountpoint
	}
	switch {
	case !strings.HasPrefix(*p, "/") || path.Clean(*p) != *p:
		v.Add("path", "Must be a clean absolute path.")
	case *p != sp.Mountpoint && !strings.HasPrefix(*p, sp.Mountpoint+"/"):
		v.Add("path", "Must be inside the space's mountpoint "+sp.Mountpoint+".")
	case site.CheckSharePath(*p) != nil:
		v.Add("path", site.CheckSharePath(*p).Error())
	}
	return nil
}

type nfsClientInput struct {
	Hosts            *string         `json:"hosts"`
	AdvancedSettings *map[string]any `json:"advanced_settings"`
	OnSites          *map[string]any `json:"on_sites"`
	AnonymousGroupID nullable[int64] `json:"anonymous_group_id"`
	AnonymousUserID  nullable[int64] `json:"anonymous_user_id"`
	FSID             nullable[int64] `json:"fsid"`
	Asynchronous     *bool           `json:"asynchronous"`
	ForceAllUserID   *bool           `json:"force_all_user_id"`
	ForceRootUserID  *bool           `json:"force_root_user_id"`
	InsecurePorts    *bool           `json:"insecure_ports"`
	ReadOnly         *bool           `json:"read_only"`
	SubtreeCheck     *bool           `json:"subtree_check"`
	WriteDelay       *bool           `json:"write_delay"`
}

type nfsShareInput struct {
	Name    *string           `json:"name"`
	Path    *string           `json:"path"`
	Space   *int64            `json:"space"`
	Clients *[]nfsClientInput `json:"clients"`
}

func renderNFSShare(c *gin.Context, s *models.NFSShare) nfsShareResponse {
	clients := make([]nfsClientResponse, len(s.Clients))
	for i, cl := range s.Clients {
		clients[i] = nfsClientResponse{ID: cl.ID, UUID: cl.UUID, NFSShare: s.ID, Hosts: cl.Hosts,
			AdvancedSettings: nonNilMap(cl.AdvancedSettings), OnSites: nonNilMap(cl.OnSites),
			AnonymousGroupID: cl.AnonymousGroupID, AnonymousUserID: cl.AnonymousUserID, FSID: cl.FSID,
			Asynchronous: cl.Asynchronous, ForceAllUserID: cl.ForceAllUserID, ForceRootUserID: cl.ForceRootUserID,
			InsecurePorts: cl.InsecurePorts, ReadOnly: cl.ReadOnly, SubtreeCheck: cl.SubtreeCheck,
			WriteDelay: cl.WriteDelay}
	}
	return nfsShareResponse{ID: s.ID, UUID: s.UUID, URL: recordURL(c, "nfsshares", s.ID), Name: s.Name, Path: s.Path,
		Space: s.SpaceID, Clients: clients}
}

func (s *Server) listNFSShares(c *gin.Context) error {
	space, err := spaceQueryFilter(c)
	if err != nil {
		return err
	}
	shares, err := models.NFSShares(c.Request.Context(), s.DB, space)
	if err != nil {
		return err
	}
	writeAll(c, shares, renderNFSShare)
	return nil
}

func (s *Server) getNFSShare(c *gin.Context) error {
	return getOne(c, s.DB, models.GetNFSShare, renderNFSShare)
}

// nfsClients validates clients; each client's id, uuid and nfs_share are
// read only: the list replaces the share's clients.
func nfsClients(v web.ValidationError, in []nfsClientInput) []models.NFSClient {
	out := make([]models.NFSClient, 0, len(in))
	for i, ci := range in {
		field := "clients[" + strconv.Itoa(i) + "]."
		if strings.TrimSpace(deref(ci.Hosts)) == "" {
			v.Add(field+"hosts", msgRequired)
		}
		// Hosts are separated as the site splits them into the exports
		// line; each must be a client exports(5) allows.
		for _, h := range strings.FieldsFunc(deref(ci.Hosts), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			if msg := vocab.NFSClientError(h); msg != "" {
				v.Add(field+"hosts", fmt.Sprintf("%q %s.", h, msg))
				break
			}
		}
		cl := models.NFSClient{Hosts: deref(ci.Hosts), AdvancedSettings: map[string]any{}, OnSites: map[string]any{}}
		if ci.AdvancedSettings != nil {
			cl.AdvancedSettings = nonNilMap(*ci.AdvancedSettings)
		}
		if ci.OnSites != nil {
			cl.OnSites = nonNilMap(*ci.OnSites)
		}
		cl.AnonymousGroupID, cl.AnonymousUserID, cl.FSID = ci.AnonymousGroupID.Value(), ci.AnonymousUserID.Value(), ci.FSID.Value()
		checkNotNeg(v, field+"anonymous_group_id", cl.AnonymousGroupID)
		checkNotNeg(v, field+"anonymous_user_id", cl.AnonymousUserID)
		checkNotNeg(v, field+"fsid", cl.FSID)
		setIf(&cl.Asynchronous, ci.Asynchronous)
		setIf(&cl.ForceAllUserID, ci.ForceAllUserID)
		setIf(&cl.ForceRootUserID, ci.ForceRootUserID)
		setIf(&cl.InsecurePorts, ci.InsecurePorts)
		setIf(&cl.ReadOnly, ci.ReadOnly)
		setIf(&cl.SubtreeCheck, ci.SubtreeCheck)
		setIf(&cl.WriteDelay, ci.WriteDelay)
		out = append(out, cl)
	}
	return out
}

func (s *Server) saveNFSShare(c *gin.Context) error {
	var in nfsShareInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var sh *models.NFSShare
	var oldSpace int64
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		sh = new(models.NFSShare)
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
			if sh, err = models.GetNFSShare(ctx, tx, id); err != nil {
				return err
			}
			oldSpace = sh.SpaceID
		}
		v := web.ValidationError{}
		setIf(&sh.Name, in.Name)
		setIf(&sh.Path, in.Path)
		if create && in.Space == nil {
			v.Add("space", msgRequired)
		}
		setIf(&sh.SpaceID, in.Space)
		if in.Space != nil || (sh.SpaceID != 0 && in.Path != nil) { // a sent space is checked even when 0
			if err := shareSpace(ctx, tx, v, sh.SpaceID, &sh.Path); err != nil {
				return err
			}
		}
		var clients []models.NFSClient
		if in.Clients != nil {
			clients = nfsClients(v, *in.Clients)
		}
		if v.Err() == nil {
			check := *sh
			if in.Clients != nil {
				check.Clients = clients
			}
			if err := site.CheckShare(hubact.NFSShareConfig(&check)); err != nil {
				v.Add("clients", err.Error())
			}
		}
		if err := v.Err(); err != nil {
			return err
		}
		if err := models.SaveNFSShare(ctx, tx, sh, clients); err != nil {
			return err
		}
		var err error
		if sh, err = models.GetNFSShare(ctx, tx, sh.ID); err != nil {
			return err
		}
		return pushShare(ctx, tx, oldSpace, sh.SpaceID, site.ShareNFS, sh.ID)
	})
	if err != nil {
		return err
	}
	return saved(c, create, renderNFSShare(c, sh))
}

func (s *Server) deleteNFSShare(c *gin.Context) error {
	return s.deleteShare(c, site.ShareNFS, func(ctx context.Context, tx bun.IDB, id int64) (int64, error) {
		sh, err := models.GetNFSShare(ctx, tx, id)
		if err != nil {
			return 0, err
		}
		return sh.SpaceID, models.DeleteNFSShare(ctx, tx, id)
	})
}

// deleteShare deletes the share of the path's id with del, which returns
// the share's space, then has that space's sites remove its file.
func (s *Server) deleteShare(c *gin.Context, kind string, del func(ctx context.Context, tx bun.IDB, id int64) (int64, error)) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	err = s.Changes.Commit(c.Request.Context(), func(ctx context.Context, tx *changes.Tx) error {
		space, err := del(ctx, tx, id)
		if err != nil {
			return err
		}
		return pushShare(ctx, tx, space, 0, kind, id)
	})
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

type smbShareInput struct {
	Name               *string         `json:"name"`
	Space              *int64          `json:"space"`
	Path               *string         `json:"path"`
	ReadOnly           *bool           `json:"read_only"`
	Visible            *bool           `json:"visible"`
	GuestOK            *bool           `json:"guest_ok"`
	HSMSupport         *bool           `json:"hsm_support"`
	MultiThreadReads   *bool           `json:"multi_thread_reads"`
	MultiThreadWrites  *bool           `json:"multi_thread_writes"`
	RootShareLocking   *bool           `json:"root_share_locking"`
	CreateMask         *string         `json:"create_mask"`
	DirectoryMask      *string         `json:"directory_mask"`
	ForceCreateMode    *string         `json:"force_create_mode"`
	ForceDirectoryMode *string         `json:"force_directory_mode"`
	AdminUsers         *map[string]any `json:"admin_users"`
	AllowedUsers       *map[string]any `json:"allowed_users"`
	HostsAllow         *map[string]any `json:"hosts_allow"`
	HostsDeny          *map[string]any `json:"hosts_deny"`
	AdvancedSettings   *map[string]any `json:"advanced_settings"`
	OnSites            *map[string]any `json:"on_sites"`
}

// smbNameInvalid are the characters Samba does not allow in share names.
const smbNameInvalid = `[]/\:;|=,+*?<>"`

// octalMode matches permission masks such as 0644 or 2775.
var octalMode = regexp.MustCompile(`^[0-7]{3,4}$`)

func renderSMBShare(c *gin.Context, s *models.SMBShare) smbShareResponse {
	return smbShareResponse{ID: s.ID, UUID: s.UUID, URL: recordURL(c, "smbshares", s.ID), Name: s.Name, Space: s.SpaceID,
		Path: s.Path, ReadOnly: s.ReadOnly, Visible: s.Visible, GuestOK: s.GuestOK, HSMSupport: s.HSMSupport,
		MultiThreadReads: s.MultiThreadReads, MultiThreadWrites: s.MultiThreadWrites,
		RootShareLocking: s.RootShareLocking, CreateMask: s.CreateMask, DirectoryMask: s.DirectoryMask,
		ForceCreateMode: s.ForceCreateMode, ForceDirectoryMode: s.ForceDirectoryMode,
		AdminUsers: nonNilMap(s.AdminUsers), AllowedUsers: nonNilMap(s.AllowedUsers),
		HostsAllow: nonNilMap(s.HostsAllow), HostsDeny: nonNilMap(s.HostsDeny),
		AdvancedSettings: nonNilMap(s.AdvancedSettings), OnSites: nonNilMap(s.OnSites)}
}

func (s *Server) listSMBShares(c *gin.Context) error {
	space, err := spaceQueryFilter(c)
	if err != nil {
		return err
	}
	shares, err := models.SMBShares(c.Request.Context(), s.DB, space)
	if err != nil {
		return err
	}
	writeAll(c, shares, renderSMBShare)
	return nil
}

func (s *Server) getSMBShare(c *gin.Context) error {
	return getOne(c, s.DB, models.GetSMBShare, renderSMBShare)
}

// apply validates in onto sh; create demands name, space, read_only and visible.
func (in *smbShareInput) apply(ctx context.Context, db bun.IDB, sh *models.SMBShare, create bool) error {
	v := web.ValidationError{}
	if in.Name != nil || create {
		name := deref(in.Name)
		switch {
		case strings.TrimSpace(name) == "":
			v.Add("name", msgRequired)
		case len(name) > 80:
			v.Add("name", "Ensure this field has no more than 80 characters.")
		case strings.ContainsAny(name, smbNameInvalid):
			v.Add("name", "A share name may not contain any of "+smbNameInvalid+".")
		case name != sh.Name:
			// Samba compares section names without case.
			if n, err := db.NewSelect().Model((*models.SMBShare)(nil)).Where("LOWER(name) = LOWER(?) AND id != ?", name, sh.ID).Count(ctx); err != nil {
				return err
			} else if n > 0 {
				v.Add("name", "An SMB share with this name already exists.")
			}
		}
		sh.Name = name
	}
	if create {
		if in.Space == nil {
			v.Add("space", msgRequired)
		}
		if in.ReadOnly == nil {
			v.Add("read_only", msgRequired)
		}
		if in.Visible == nil {
			v.Add("visible", msgRequired)
		}
	}
	setIf(&sh.SpaceID, in.Space)
	setIf(&sh.Path, in.Path)
	if in.Space != nil || (sh.SpaceID != 0 && in.Path != nil) { // a sent space is checked even when 0
		if err := shareSpace(ctx, db, v, sh.SpaceID, &sh.Path); err != nil {
			return err
		}
	}
	for field, m := range map[string]*string{"create_mask": in.CreateMask, "directory_mask": in.DirectoryMask,
		"force_create_mode": in.ForceCreateMode, "force_directory_mode": in.ForceDirectoryMode} {
		if m != nil && *m != "" && !octalMode.MatchString(*m) {
			v.Add(field, "Enter an octal mode such as 0644.")
		}
	}
	setIf(&sh.ReadOnly, in.ReadOnly)
	setIf(&sh.Visible, in.Visible)
	setIf(&sh.GuestOK, in.GuestOK)
	setIf(&sh.HSMSupport, in.HSMSupport)
	setIf(&sh.MultiThreadReads, in.MultiThreadReads)
	setIf(&sh.MultiThreadWrites, in.MultiThreadWrites)
	setIf(&sh.RootShareLocking, in.RootShareLocking)
	setIf(&sh.CreateMask, in.CreateMask)
	setIf(&sh.DirectoryMask, in.DirectoryMask)
	setIf(&sh.ForceCreateMode, in.ForceCreateMode)
	setIf(&sh.ForceDirectoryMode, in.ForceDirectoryMode)
	for dst, src := range map[*map[string]any]*map[string]any{&sh.AdminUsers: in.AdminUsers, &sh.AllowedUsers: in.AllowedUsers,
		&sh.HostsAllow: in.HostsAllow, &sh.HostsDeny: in.HostsDeny, &sh.AdvancedSettings: in.AdvancedSettings, &sh.OnSites: in.OnSites} {
		if src != nil {
			*dst = nonNilMap(*src)
		}
	}
	return v.Err()
}

func (s *Server) saveSMBShare(c *gin.Context) error {
	var in smbShareInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var sh *models.SMBShare
	var oldSpace int64
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		sh = &models.SMBShare{AdminUsers: map[string]any{}, AllowedUsers: map[string]any{}, HostsAllow: map[string]any{},
			HostsDeny: map[string]any{}, AdvancedSettings: map[string]any{}, OnSites: map[string]any{}}
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
			if sh, err = models.GetSMBShare(ctx, tx, id); err != nil {
				return err
			}
			oldSpace = sh.SpaceID
		}
		if err := in.apply(ctx, tx, sh, create); err != nil {
			return err
		}
		if err := site.CheckShare(hubact.SMBShareConfig(sh)); err != nil {
			return web.Invalid("non_field_errors", err.Error())
		}
		if err := models.SaveSMBShare(ctx, tx, sh); err != nil {
			return err
		}
		var err error
		if sh, err = models.GetSMBShare(ctx, tx, sh.ID); err != nil {
			return err
		}
		return pushShare(ctx, tx, oldSpace, sh.SpaceID, site.ShareSMB, sh.ID)
	})
	if err != nil {
		return err
	}
	return saved(c, create, renderSMBShare(c, sh))
}

func (s *Server) deleteSMBShare(c *gin.Context) error {
	return s.deleteShare(c, site.ShareSMB, func(ctx context.Context, tx bun.IDB, id int64) (int64, error) {
		sh, err := models.GetSMBShare(ctx, tx, id)
		if err != nil {
			return 0, err
		}
		return sh.SpaceID, models.DeleteSMBShare(ctx, tx, id)
	})
}

// pushShare has the sites of the share's former space (from) and of its
// current space (to) bring the share's file up to date, through the
// workflows of those spaces so that it follows their own changes. 0 means
// none. The site's file is decided when the op runs, from the share as it
// is then (ShareOnSite), so ops racing each other cannot leave it stale.
func pushShare(ctx context.Context, tx *changes.Tx, from, to int64, kind string, id int64) error {
	spaces := []int64{to}
	if from != to {
		spaces = append(spaces, from)
	}
	for _, spaceID := range spaces {
		if spaceID == 0 {
			continue
		}
		sp, err := models.GetSpace(ctx, tx, spaceID, models.SpaceFilter{})
		if err != nil {
			return err
		}
		var ops []workflows.SpaceOp
		for _, l := range sp.Links {
			ops = append(ops, changes.ShareOp(l.Site.Name, kind, id))
		}
		if err := changes.OweSpaceOps(ctx, tx, spaceID, ops); err != nil {
			return err
		}
	}
	return nil
}
