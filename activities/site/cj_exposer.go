package site

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/thehub/hub/workflows/vocab"
)

// Exposer kinds.
const (
	CJNFS        = "nfs"
	CJCIFS       = "cifs"
	CJGPFSNative = "gpfsnative"
)

// Values that end up in configuration files may hold no spaces, quotes or
// line breaks: the API checks the same patterns, the site checks again.
var (
	cjUserRE = regexp.MustCompile(`^[A-Za-z0-9_.@+-]+$`)
)

// cjDefaultNFSOptions apply when an NFS exposer names none.
const cjDefaultNFSOptions = "rw,sync,no_subtree_check"

// cjExposerFiles are the configuration files of an exposer of each kind.
func (a *Activities) cjExposerFiles(name string) map[string]string {
	return map[string]string{
		CJNFS:        a.cjConfigFile(cjExportsDir, name, ".exports"),
		CJCIFS:       a.cjConfigFile(cjSMBDir, name, ".conf"),
		CJGPFSNative: a.cjConfigFile(cjNativeDir, name, ".conf"),
	}
}

// cjExposer writes the export line or share definition of an exposer into
// the site's configuration folder, or removes it.
func (a *Activities) cjExposer(e *CJExposer, del bool) (string, error) {
	files := a.cjExposerFiles(e.Name)
	file, ok := files[e.Kind]
	if !ok {
		return "", cjPermanent(fmt.Errorf("unknown exposer type %q", e.Kind))
	}
	rel := file
	if del {
		// Every kind's file, in case an older version of the item had another.
		for _, f := range files {
			if err := a.cjRemoveFile(f); err != nil {
				return "", fmt.Errorf("remove %s: %w", f, err)
			}
		}
		return "removed " + rel, nil
	}

	if !cjNameRE.MatchString(e.Space) {
		return "", cjPermanent(fmt.Errorf("invalid space name %q", e.Space))
	}
	spaceRel := path.Join(cjSpacesDir, e.Space)
	dir, err := a.cjSub(spaceRel, e.Path)
	if err != nil {
		return "", err
	}
	// The folder is checked open beneath the root, so a symlink swapped in
	// for it (or a folder above it) is refused, not followed. A missing
	// folder may be a space still being created: retried.
	exported := path.Join(spaceRel, e.Path)
	switch err := a.Root.checkDir(exported); {
	case errors.Is(err, syscall.ENOTDIR):
		return "", cjPermanent(fmt.Errorf("exported path %s is not a directory", exported))
	case err != nil:
		return "", fmt.Errorf("exported folder %s: %w", exported, err)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# Managed by the hub: C+J exposer %q (%s) of space %q. Changes here are overwritten.\n", e.Name, e.Kind, e.Space)
	switch e.Kind {
	case CJNFS:
		opts := e.Options
		if opts == "" {
			opts = cjDefaultNFSOptions
		}
		if err := checkNFSOptions(opts); err != nil {
			return "", cjPermanent(err)
		}
		clients := e.Clients
		if len(clients) == 0 {
			clients = []string{"*"}
		}
		// exportfs reads a double quote as the end of the quoted path
		// (strconv.Quote's escapes mean nothing to it): a path holding
		// one would add a client entry with options of its own
		// (*(rw,no_root_squash)), as a reviewer showed. Refused for good,
		// as the cifs branch and the hub API's NFS shares refuse it.
		if err := CheckSharePath(dir); err != nil {
			return "", cjPermanent(err)
		}
		b.WriteString(strconv.Quote(dir))
		for _, c := range clients {
			if why := vocab.NFSClientError(c); why != "" {
				return "", cjPermanent(fmt.Errorf("invalid NFS client %q: %s", c, why))
			}
			fmt.Fprintf(&b, " %s(%s)", c, opts)
		}
		b.WriteString("\n")
	case CJCIFS:
		for _, u := range e.ValidUsers {
			if !cjUserRE.MatchString(u) {
				return "", cjPermanent(fmt.Errorf("invalid SMB user %q", u))
			}
		}
		if err := a.checkSMBExposer(e.Name, dir); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "[%s]\n", e.Name)
		fmt.Fprintf(&b, "    path = %s\n", dir)
		fmt.Fprintf(&b, "    read only = %s\n", map[bool]string{true: "yes", false: "no"}[e.ReadOnly])
		if len(e.ValidUsers) > 0 {
			fmt.Fprintf(&b, "    valid users = %s\n", strings.Join(e.ValidUsers, " "))
		}
	case CJGPFSNative:
		fmt.Fprintf(&b, "fileset = %s\npath = %s\n", e.Space, dir)
	}
	for kind, f := range files {
		if kind != e.Kind {
			if err := a.cjRemoveFile(f); err != nil {
				return "", err
			}
		}
	}
	write := a.cjWriteFile
	if e.Kind == CJNFS {
		write = a.writeExport
	}
	if err := write(file, []byte(b.String())); errors.Is(err, errFSIDInUse) {
		return "", cjPermanent(err)
	} else if err != nil {
		return "", fmt.Errorf("write %s: %w", rel, err)
	}
	return "wrote " + rel, nil
}

// checkSMBExposer refuses what Samba would not read as one share of its
// own: a reserved section's name (global set defaults for every share
// loaded after it), a name another exposer has but for case (Samba makes
// them one section, whose path the last one read sets: one space's users
// in another's), a path holding % (Samba substitutions a client steers)
// or a trailing backslash (a line continuation).
func (a *Activities) checkSMBExposer(name, dir string) error {
	if smbReservedSections[normalSMBName(name)] {
		return cjPermanent(fmt.Errorf("exposer name %q is a reserved smb.conf section", name))
	}
	if err := CheckSharePath(dir); err != nil {
		return cjPermanent(err)
	}
	cfg, err := a.openConfig()
	if err != nil {
		return err
	}
	defer cfg.Close()
	names, err := namesIn(cfg, cjSMBDir)
	if err != nil {
		return err
	}
	for _, n := range names {
		other, ok := strings.CutSuffix(n, ".conf")
		if ok && other != name && normalSMBName(other) == normalSMBName(name) {
			return cjPermanent(fmt.Errorf("exposer name %q differs from exposer %q only by case: Samba would make them one share", name, other))
		}
	}
	return nil
}
