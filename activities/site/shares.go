package site

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/fsutil"
)

// Kinds of ShareConfig.
const (
	ShareNFS = "nfs"
	ShareSMB = "smb"
)

// sharesDir is the folder of the configuration folder holding the export
// and share definitions of hub API shares, one file per share.
const sharesDir = "shares"

// ShareConfig is an NFS export or SMB share of a hub space as the site
// writes it. The hub turns the share record into options; the site
// resolves the path inside its root and checks every value again before it
// reaches a file.
type ShareConfig struct {
	Kind string `json:"kind"`
	ID   int64  `json:"id"`
	Path string `json:"path"` // root-relative folder, inside the space
	// NFS: one export rule per client.
	NFSClients []NFSExportClient `json:"nfs_clients,omitempty"`
	// SMB: the share's section name and parameters, in order.
	SMBName   string     `json:"smb_name,omitempty"`
	SMBParams []SMBParam `json:"smb_params,omitempty"`
}

// NFSExportClient is one export rule: hosts (separated by spaces or
// commas) and the options they get.
type NFSExportClient struct {
	Hosts   string `json:"hosts"`
	Options string `json:"options"`
}

// SMBParam is one "key = value" line of an SMB share section.
type SMBParam struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

var (
	smbKeyRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9 :]*$`)
	smbValueRE = regexp.MustCompile(`^[^\x00-\x1f\x7f]*$`)
	smbNameRE  = regexp.MustCompile(`^[^\x00-\x1f\x7f\[\]/\\:;|=,+*?<>"]{1,80}$`)
)

// shareFile is the configuration file of a share.
func (a *Activities) shareFile(in ShareConfig) (string, error) {
	ext := map[string]string{ShareNFS: ".exports", ShareSMB: ".conf"}[in.Kind]
	if ext == "" || in.ID <= 0 {
		err := fmt.Errorf("unknown share %s %d", in.Kind, in.ID)
		return "", temporal.NewNonRetryableApplicationError(err.Error(), spaceDirFailure, err)
	}
	return filepath.Join(a.ConfigDir, sharesDir, fmt.Sprintf("%s-%d%s", in.Kind, in.ID, ext)), nil
}

// WriteShare writes a share's export line or share section into the
// site's configuration folder. A missing folder is retried (its space may
// still be on its way); a bad value fails without retries.
func (a *Activities) WriteShare(ctx context.Context, in ShareConfig) (SpaceDirResult, error) {
	res := SpaceDirResult{Path: in.Path}
	file, err := a.shareFile(in)
	if err != nil {
		return res, err
	}
	dir, err := a.spaceDir(in.Path)
	if err != nil {
		return res, err
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return res, fmt.Errorf("shared folder %s on site %s: %w", in.Path, a.Site, err)
	case !fi.IsDir():
		return res, spaceDirErr(fmt.Errorf("shared path %s on site %s is not a folder", in.Path, a.Site))
	}
	text, err := renderShare(in, dir)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), spaceDirFailure, err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		return res, err
	}
	if err := fsutil.WriteFile(file, []byte(text), 0o644); err != nil {
		return res, err
	}
	res.Outcome, res.Message = "written", fmt.Sprintf("wrote %s/%s on site %s", sharesDir, filepath.Base(file), a.Site)
	return res, nil
}

// RemoveShare removes a share's file; a missing one is already removed.
func (a *Activities) RemoveShare(ctx context.Context, in ShareConfig) (SpaceDirResult, error) {
	res := SpaceDirResult{Path: in.Path}
	file, err := a.shareFile(in)
	if err != nil {
		return res, err
	}
	if err := cjRemoveFile(file); err != nil {
		return res, err
	}
	res.Outcome, res.Message = SpaceDirRemoved, fmt.Sprintf("removed %s/%s on site %s", sharesDir, filepath.Base(file), a.Site)
	return res, nil
}

// CheckShare tells whether the site would accept a share's values, so the
// API can refuse bad ones with a 400 before they reach a site.
func CheckShare(in ShareConfig) error {
	_, err := renderShare(in, "/checked")
	return err
}

func renderShare(in ShareConfig, dir string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Managed by the hub: %s share %d (%s). Changes here are overwritten.\n", in.Kind, in.ID, in.Path)
	switch in.Kind {
	case ShareNFS:
		line := strconv.Quote(dir)
		for _, c := range in.NFSClients {
			if !cjOptionsRE.MatchString(c.Options) {
				return "", fmt.Errorf("invalid NFS options %q", c.Options)
			}
			for _, h := range strings.FieldsFunc(c.Hosts, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
				if !cjClientRE.MatchString(h) {
					return "", fmt.Errorf("invalid NFS client %q", h)
				}
				line += fmt.Sprintf(" %s(%s)", h, c.Options)
			}
		}
		if line == strconv.Quote(dir) {
			b.WriteString("# No client: nothing is exported.\n")
		} else {
			b.WriteString(line + "\n")
		}
	case ShareSMB:
		if !smbNameRE.MatchString(in.SMBName) {
			return "", fmt.Errorf("invalid SMB share name %q", in.SMBName)
		}
		fmt.Fprintf(&b, "[%s]\n    path = %s\n", in.SMBName, dir)
		for _, p := range in.SMBParams {
			if !smbKeyRE.MatchString(p.Key) || p.Key == "path" || !smbValueRE.MatchString(p.Value) {
				return "", fmt.Errorf("invalid SMB parameter %q = %q", p.Key, p.Value)
			}
			fmt.Fprintf(&b, "    %s = %s\n", p.Key, p.Value)
		}
	}
	return b.String(), nil
}
