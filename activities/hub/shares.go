package hub

import (
	"context"
	"errors"
	"fmt"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// workflows.ShareOnSite reads a share as it is now: its file belongs on the site
// when the share exists and its space is on that site.
func (a *Activities) ShareOnSite(ctx context.Context, ref workflows.ShareRef) (workflows.ShareOnSite, error) {
	out := workflows.ShareOnSite{Config: site.ShareConfig{Kind: ref.Kind, ID: ref.ID}}
	var spaceID int64
	var err error
	switch ref.Kind {
	case site.ShareNFS:
		var sh *models.NFSShare
		if sh, err = models.GetNFSShare(ctx, a.DB, ref.ID); err == nil {
			spaceID, out.Config = sh.SpaceID, changes.NFSShareConfig(sh)
		}
	case site.ShareSMB:
		var sh *models.SMBShare
		if sh, err = models.GetSMBShare(ctx, a.DB, ref.ID); err == nil {
			spaceID, out.Config = sh.SpaceID, changes.SMBShareConfig(sh)
		}
	default:
		return out, fmt.Errorf("unknown share kind %q", ref.Kind)
	}
	if errors.Is(err, models.ErrNotFound) {
		return out, nil // deleted: no file
	} else if err != nil {
		return out, err
	}
	sp, err := models.GetSpace(ctx, a.DB, spaceID, models.SpaceFilter{})
	if err != nil {
		return out, err
	}
	for _, l := range sp.Links {
		out.Write = out.Write || l.Site.Name == ref.Site
	}
	return out, nil
}
