package hub

import (
	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
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

func (s *Server) saveNFSShare(c *gin.Context) error {
	var in changes.NFSShareInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	sh, err := s.Changes.SaveNFSShare(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	create := id == 0
	return saved(c, create, renderNFSShare(c, sh))
}

func (s *Server) deleteNFSShare(c *gin.Context) error {
	return deleteThrough(c, s.Changes.DeleteNFSShare)
}

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

func (s *Server) saveSMBShare(c *gin.Context) error {
	var in changes.SMBShareInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	sh, err := s.Changes.SaveSMBShare(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	return saved(c, id == 0, renderSMBShare(c, sh))
}

func (s *Server) deleteSMBShare(c *gin.Context) error {
	return deleteThrough(c, s.Changes.DeleteSMBShare)
}
