package changes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// shareSpace checks a share's space id and path: the path defaults to the
// space's mountpoint and must lie inside it.
func shareSpace(ctx context.Context, db bun.IDB, v models.FieldErrors, spaceID int64, p *string) error {
	sp, err := models.GetSpace(ctx, db, spaceID, models.SpaceFilter{})
	if errors.Is(err, models.ErrNotFound) {
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

type NFSClientInput struct {
	Hosts            *string         `json:"hosts"`
	AdvancedSettings *map[string]any `json:"advanced_settings"`
	OnSites          *map[string]any `json:"on_sites"`
	AnonymousGroupID Nullable[int64] `json:"anonymous_group_id"`
	AnonymousUserID  Nullable[int64] `json:"anonymous_user_id"`
	FSID             Nullable[int64] `json:"fsid"`
	Asynchronous     *bool           `json:"asynchronous"`
	ForceAllUserID   *bool           `json:"force_all_user_id"`
	ForceRootUserID  *bool           `json:"force_root_user_id"`
	InsecurePorts    *bool           `json:"insecure_ports"`
	ReadOnly         *bool           `json:"read_only"`
	SubtreeCheck     *bool           `json:"subtree_check"`
	WriteDelay       *bool           `json:"write_delay"`
}

type NFSShareInput struct {
	Name    *string           `json:"name"`
	Path    *string           `json:"path"`
	Space   *int64            `json:"space"`
	Clients *[]NFSClientInput `json:"clients"`
}

// nfsClients validates clients; each client's id, uuid and nfs_share are
// read only: the list replaces the share's clients.
func nfsClients(v models.FieldErrors, in []NFSClientInput) []models.NFSClient {
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
			cl.AdvancedSettings = nonNil(*ci.AdvancedSettings)
		}
		if ci.OnSites != nil {
			cl.OnSites = nonNil(*ci.OnSites)
		}
		cl.AnonymousGroupID, cl.AnonymousUserID, cl.FSID = ci.AnonymousGroupID.Value(), ci.AnonymousUserID.Value(), ci.FSID.Value()
		CheckNotNeg(v, field+"anonymous_group_id", cl.AnonymousGroupID)
		CheckNotNeg(v, field+"anonymous_user_id", cl.AnonymousUserID)
		CheckNotNeg(v, field+"fsid", cl.FSID)
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

type SMBShareInput struct {
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

// apply validates in onto sh; create demands name, space, read_only and visible.
func (in *SMBShareInput) apply(ctx context.Context, db bun.IDB, sh *models.SMBShare, create bool) error {
	v := models.FieldErrors{}
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
			*dst = nonNil(*src)
		}
	}
	return v.Err()
}

// pushShare has the sites of the share's former space (from) and of its
// current space (to) bring the share's file up to date, through the
// workflows of those spaces so that it follows their own changes. 0 means
// none. The site's file is decided when the op runs, from the share as it
// is then (ShareOnSite), so ops racing each other cannot leave it stale.
func pushShare(ctx context.Context, tx *Tx, from, to int64, kind string, id int64) error {
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
			ops = append(ops, ShareOp(l.Site.Name, kind, id))
		}
		if err := OweSpaceOps(ctx, tx, spaceID, ops); err != nil {
			return err
		}
	}
	return nil
}

// SaveNFSShare creates (id 0) or updates NFS share id from in; its
// clients, when sent, replace the share's. The sites of its space (and of
// its former space) bring its exports up to date.
func (s *Service) SaveNFSShare(ctx context.Context, id int64, in NFSShareInput) (*models.NFSShare, error) {
	create := id == 0
	var sh *models.NFSShare
	var oldSpace int64
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		sh = new(models.NFSShare)
		if !create {
			var err error
			if sh, err = models.GetNFSShare(ctx, tx, id); err != nil {
				return err
			}
			oldSpace = sh.SpaceID
		}
		v := models.FieldErrors{}
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
			if err := site.CheckShare(NFSShareConfig(&check)); err != nil {
				v.Add("clients", err.Error())
			} else if err := fsidsFree(ctx, tx, &check, v); err != nil {
				return err
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
	return sh, err
}

// SaveSMBShare creates (id 0) or updates SMB share id from in; the sites
// of its space (and of its former space) bring its section up to date.
func (s *Service) SaveSMBShare(ctx context.Context, id int64, in SMBShareInput) (*models.SMBShare, error) {
	create := id == 0
	var sh *models.SMBShare
	var oldSpace int64
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		sh = &models.SMBShare{AdminUsers: map[string]any{}, AllowedUsers: map[string]any{}, HostsAllow: map[string]any{},
			HostsDeny: map[string]any{}, AdvancedSettings: map[string]any{}, OnSites: map[string]any{}}
		if !create {
			var err error
			if sh, err = models.GetSMBShare(ctx, tx, id); err != nil {
				return err
			}
			oldSpace = sh.SpaceID
		}
		if err := in.apply(ctx, tx, sh, create); err != nil {
			return err
		}
		if err := site.CheckShare(SMBShareConfig(sh)); err != nil {
			return models.Invalid("non_field_errors", err.Error())
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
	return sh, err
}

// DeleteNFSShare deletes NFS share id; its space's sites remove it.
func (s *Service) DeleteNFSShare(ctx context.Context, id int64) error {
	return s.deleteShare(ctx, site.ShareNFS, id, func(ctx context.Context, tx bun.IDB) (int64, error) {
		sh, err := models.GetNFSShare(ctx, tx, id)
		if err != nil {
			return 0, err
		}
		return sh.SpaceID, models.DeleteNFSShare(ctx, tx, id)
	})
}

// DeleteSMBShare deletes SMB share id; its space's sites remove it.
func (s *Service) DeleteSMBShare(ctx context.Context, id int64) error {
	return s.deleteShare(ctx, site.ShareSMB, id, func(ctx context.Context, tx bun.IDB) (int64, error) {
		sh, err := models.GetSMBShare(ctx, tx, id)
		if err != nil {
			return 0, err
		}
		return sh.SpaceID, models.DeleteSMBShare(ctx, tx, id)
	})
}

// deleteShare deletes share id of kind with del, which returns the
// share's space, and has that space's sites remove its file.
func (s *Service) deleteShare(ctx context.Context, kind string, id int64, del func(ctx context.Context, tx bun.IDB) (int64, error)) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		space, err := del(ctx, tx)
		if err != nil {
			return err
		}
		return pushShare(ctx, tx, space, 0, kind, id)
	})
}

// fsidsFree refuses (on clients) an fsid that another NFS share of
// another folder uses: the NFS server takes two exports with one fsid for
// one filesystem, and the file handles of one reach the other's files.
// The sites check again across both APIs' exports.
func fsidsFree(ctx context.Context, tx *Tx, sh *models.NFSShare, v models.FieldErrors) error {
	mine := map[int64]bool{}
	for _, c := range sh.Clients {
		if c.FSID != nil {
			mine[*c.FSID] = true
		}
	}
	if len(mine) == 0 {
		return nil
	}
	others, err := models.NFSShares(ctx, tx, nil)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.ID == sh.ID || (o.SpaceID == sh.SpaceID && o.Path == sh.Path) {
			continue
		}
		for _, c := range o.Clients {
			if c.FSID != nil && mine[*c.FSID] {
				v.Add("clients", fmt.Sprintf("fsid %d is already used by NFS share %d (%s); each exported folder needs its own", *c.FSID, o.ID, o.Path))
				return nil
			}
		}
	}
	return nil
}
