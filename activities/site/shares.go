package site

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/workflows/vocab"
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
	// smbValueRE: no control characters and no % (Samba substitutions);
	// a trailing backslash (a line continuation) is refused separately.
	smbValueRE = regexp.MustCompile(`^[^\x00-\x1f\x7f%]*$`)
	smbKeyRE   = regexp.MustCompile(`^[A-Za-z]+( [A-Za-z0-9]+)*$`)
	smbNameRE  = regexp.MustCompile(`^[^\x00-\x1f\x7f\[\]/\\:;|=,+*?<>"%]{1,80}$`)
	// sharePathRE: a shared folder's path goes into configuration files
	// as it is; quotes, backslashes (escapes, line continuations), %
	// (Samba substitutions) and control characters are refused.
	sharePathRE = regexp.MustCompile(`^/[^\x00-\x1f\x7f"\\%]*$`)
)

// smbParams are the SMB share parameters the hub writes, by their
// normalised name (Samba ignores case and spaces in names): the ones the
// share's fields map to and the share-level settings advanced_settings may
// add. Anything else (global or service-running parameters such as
// "root preexec", "include", "path") is refused.
var smbParams = map[string]string{}

func init() {
	for _, p := range []string{
		// from the share's fields
		"read only", "browseable", "guest ok", "create mask", "directory mask", "force create mode",
		"force directory mode", "admin users", "valid users", "hosts allow", "hosts deny",
		// advanced_settings
		"comment", "available", "writeable", "read list", "write list", "invalid users", "max connections",
		"inherit acls", "inherit permissions", "inherit owner", "hide dot files", "hide files", "hide unreadable",
		"veto files", "delete veto files", "store dos attributes", "ea support", "map acl inherit", "nt acl support",
		"acl allow execute always", "oplocks", "level2 oplocks", "strict locking", "kernel share modes", "posix locking",
		"durable handles", "case sensitive", "preserve case", "short preserve case", "default case", "csc policy",
		"access based share enum", "smb encrypt", "strict allocate", "strict sync", "aio read size", "vfs objects",
		"aio write size", "dos filemode", "dos filetimes", "follow symlinks",
	} {
		smbParams[normalSMBName(p)] = p
	}
}

// smbVFSModules are the VFS modules "vfs objects" may name: common,
// share-local ones (not widelinks, shell_snap, preopen and the like).
var smbVFSModules = map[string]bool{
	"acl_xattr": true, "fruit": true, "streams_xattr": true, "shadow_copy2": true, "recycle": true,
	"catia": true, "dirsort": true, "fileid": true, "xattr_tdb": true, "btrfs": true, "gpfs": true,
}

// normalSMBName is a parameter or section name as Samba compares it.
func normalSMBName(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), ""))
}

// smbReservedSections are the smb.conf sections that are not shares.
var smbReservedSections = map[string]bool{"global": true, "globals": true, "homes": true, "printers": true, "print$": true, "ipc$": true}

// shareFile is the configuration file of a share, below the
// configuration folder.
func (a *Activities) shareFile(in ShareConfig) (string, error) {
	ext := map[string]string{ShareNFS: ".exports", ShareSMB: ".conf"}[in.Kind]
	if ext == "" || in.ID <= 0 {
		err := fmt.Errorf("unknown share %s %d", in.Kind, in.ID)
		return "", temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	}
	return path.Join(sharesDir, fmt.Sprintf("%s-%d%s", in.Kind, in.ID, ext)), nil
}

// WriteShare writes a share's export line or share section into the
// site's configuration folder. A missing folder is retried (its space may
// still be on its way); a bad value fails without retries.
func (a *Activities) WriteShare(ctx context.Context, in ShareConfig) (res SpaceDirResult, err error) {
	res = SpaceDirResult{Path: in.Path}
	file, err := a.shareFile(in)
	if err != nil {
		return res, err
	}
	// When the share is refused here (bad path, bad value, missing
	// folder), its previous, possibly wider, definition does not stay in
	// force; a passing error (I/O) is retried and leaves it.
	defer func() {
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.NonRetryable() {
			_ = a.cjRemoveFile(file)
		}
	}()
	dir, err := a.spaceDir(in.Path)
	if err != nil {
		return res, err
	}
	// The folder is checked open beneath the root: a symlink on the way
	// would export whatever it points at (another space, the hub's own
	// folder), and one swapped in after a check by name would too. The
	// space's folder is made first by the same workflow: a shared folder
	// still missing is the share's own problem, reported at once rather
	// than holding up the space's later changes.
	switch err := a.Root.checkDir(in.Path); {
	case errors.Is(err, ErrSymlink):
		err := fmt.Errorf("the shared path %s goes through a symlink: refused", in.Path)
		return res, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	case errors.Is(err, syscall.ENOTDIR):
		err := fmt.Errorf("shared path %s on site %s is not a folder", in.Path, a.Site)
		return res, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	case isNotExist(err):
		err := fmt.Errorf("shared folder %s does not exist on site %s", in.Path, a.Site)
		return res, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	case err != nil:
		return res, spaceDirErr(fmt.Errorf("shared folder %s on site %s: %w", in.Path, a.Site, err))
	}
	text, err := renderShare(in, dir)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	}
	write := a.writeConfig
	if in.Kind == ShareNFS {
		write = a.writeExport
	}
	if err := write(file, []byte(text)); errors.Is(err, errFSIDInUse) {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	} else if err != nil {
		return res, err
	}
	res.Outcome, res.Message = "written", fmt.Sprintf("wrote %s on site %s", file, a.Site)
	return res, nil
}

// RemoveShare removes a share's file; a missing one is already removed.
func (a *Activities) RemoveShare(ctx context.Context, in ShareConfig) (SpaceDirResult, error) {
	res := SpaceDirResult{Path: in.Path}
	file, err := a.shareFile(in)
	if err != nil {
		return res, err
	}
	if err := a.cjRemoveFile(file); err != nil {
		return res, err
	}
	res.Outcome, res.Message = SpaceDirRemoved, fmt.Sprintf("removed %s on site %s", file, a.Site)
	return res, nil
}

// CheckShare tells whether the site would accept a share's values, so the
// API can refuse bad ones with a 400 before they reach a site.
func CheckShare(in ShareConfig) error {
	_, err := renderShare(in, in.Path)
	return err
}

// CheckSharePath tells whether a path can be written into export and
// share definitions as it is.
func CheckSharePath(p string) error {
	if !sharePathRE.MatchString(p) {
		return fmt.Errorf("a shared path may not hold quotes, backslashes, %% or control characters: %q", p)
	}
	return nil
}

func renderShare(in ShareConfig, dir string) (string, error) {
	for _, p := range []string{in.Path, dir} {
		if err := CheckSharePath(p); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Managed by the hub: %s share %d (%s). Changes here are overwritten.\n", in.Kind, in.ID, in.Path)
	switch in.Kind {
	case ShareNFS:
		line := strconv.Quote(dir)
		for _, c := range in.NFSClients {
			if err := checkNFSOptions(c.Options); err != nil {
				return "", err
			}
			for _, h := range strings.FieldsFunc(c.Hosts, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
				if why := vocab.NFSClientError(h); why != "" {
					return "", fmt.Errorf("invalid NFS client %q: %s", h, why)
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
		// Samba folds runs of spaces in section names: refuse them, so two
		// names cannot become one section.
		if !smbNameRE.MatchString(in.SMBName) || smbReservedSections[normalSMBName(in.SMBName)] ||
			strings.Join(strings.Fields(in.SMBName), " ") != in.SMBName {
			return "", fmt.Errorf("invalid SMB share name %q", in.SMBName)
		}
		fmt.Fprintf(&b, "[%s]\n    path = %s\n", in.SMBName, dir)
		for _, p := range in.SMBParams {
			key := smbParams[normalSMBName(p.Key)]
			if key == "" || !smbKeyRE.MatchString(p.Key) {
				return "", fmt.Errorf("SMB parameter %q is not one a share may set here", p.Key)
			}
			if !smbValueRE.MatchString(p.Value) || strings.HasSuffix(strings.TrimRight(p.Value, " \t"), "\\") {
				return "", fmt.Errorf("invalid value for SMB parameter %q: no control characters, %% or trailing backslash", p.Key)
			}
			if key == "vfs objects" {
				if strings.TrimSpace(p.Value) == "" {
					return "", fmt.Errorf("vfs objects needs at least one module")
				}
				for _, m := range strings.Fields(p.Value) {
					if !smbVFSModules[m] {
						return "", fmt.Errorf("VFS module %q is not one a share may load here", m)
					}
				}
			}
			fmt.Fprintf(&b, "    %s = %s\n", key, p.Value) // the allow-list's spelling
		}
	}
	return b.String(), nil
}

// nfsOptions are the export options a hub share may use, with a check of
// the value for those that take one. Options that reach beyond the share
// or its squashing (no_root_squash, crossmnt, nohide, fsid=0/root,
// refer, replicas, mountpoint) are not among them.
var nfsOptions = map[string]func(string) bool{
	"ro": nil, "rw": nil, "sync": nil, "async": nil, "subtree_check": nil, "no_subtree_check": nil,
	"wdelay": nil, "no_wdelay": nil, "secure": nil, "insecure": nil, "root_squash": nil, "all_squash": nil,
	"no_acl": nil, "acl": nil, "nordirplus": nil, "rdirplus": nil, "no_all_squash": nil, "hide": nil,
	"secure_locks": nil, "auth_nlm": nil, "insecure_locks": nil, "no_auth_nlm": nil,
	// 0 is root: anonuid=0 would undo the squashing, fsid=0 is the NFSv4 root
	"anonuid": isPositive, "anongid": isPositive, "fsid": isPositive,
	"sec": regexp.MustCompile(`^(sys|krb5|krb5i|krb5p)(:(sys|krb5|krb5i|krb5p))*$`).MatchString,
}

func isPositive(v string) bool {
	n, err := strconv.ParseUint(v, 10, 32)
	return err == nil && n > 0
}

// checkNFSOptions checks a comma-separated export option list.
func checkNFSOptions(opts string) error {
	if opts == "" {
		return nil
	}
	for _, o := range strings.Split(opts, ",") {
		name, value, hasValue := strings.Cut(o, "=")
		check, known := nfsOptions[name]
		switch {
		case !known:
			return fmt.Errorf("NFS option %q is not one a share may set here", o)
		case (check == nil) == hasValue, check != nil && !check(value):
			return fmt.Errorf("invalid NFS option %q", o)
		}
	}
	return nil
}
