package site

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// errFSIDInUse: an export names an fsid another export of the site uses.
// The NFS server takes two exports with one fsid for one filesystem, and
// the file handles of one then reach the other's files.
var errFSIDInUse = errors.New("NFS fsid already in use")

// fsidRE finds an fsid option in an export line's options.
var fsidRE = regexp.MustCompile(`(?:^|[(,])fsid=([^,)]+)`)

// exportFSIDs returns the fsid values an exports file sets, each with the
// path it exports.
func exportFSIDs(text string) map[string]string {
	ids := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		// The path first (quoted, or up to the first blank), then the
		// clients and their options.
		p, rest, _ := strings.Cut(line, " ")
		if line[0] == '"' {
			if q, err := strconv.QuotedPrefix(line); err == nil {
				rest = line[len(q):]
				p, _ = strconv.Unquote(q)
			}
		}
		for _, m := range fsidRE.FindAllStringSubmatch(rest, -1) {
			ids[m[1]] = p
		}
	}
	return ids
}

// exportsDirs are the configuration folders holding NFS exports: the hub
// API's shares and the C+J API's exposers.
var exportsDirs = []string{sharesDir, cjExportsDir}

// writeExport writes the NFS exports file rel, refusing it (errFSIDInUse)
// when it sets an fsid another exports file of the site sets for another
// path. The check and the write hold the configuration folder locked, so
// two exports written at once cannot both take one fsid.
func (a *Activities) writeExport(rel string, data []byte) error {
	cfg, err := a.openConfig()
	if err != nil {
		return err
	}
	defer cfg.Close()
	lock, err := openBeneath(cfg, ".", os.O_RDONLY|oDirectory, 0) // flock needs a descriptor opened for reading
	if err != nil {
		return err
	}
	defer lock.Close() // which releases the lock
	if err := flockWait(lock); err != nil && !noLocks(err) {
		return err
	}
	mine := exportFSIDs(string(data))
	if len(mine) > 0 {
		for _, dir := range exportsDirs {
			names, err := namesIn(cfg, dir)
			if err != nil {
				return err
			}
			for _, n := range names {
				other := path.Join(dir, n)
				if other == rel || !strings.HasSuffix(n, ".exports") {
					continue
				}
				f, err := openBeneath(cfg, other, os.O_RDONLY|openNoFollow, 0)
				if err != nil {
					return fmt.Errorf("read %s: %w", other, err)
				}
				b, err := io.ReadAll(io.LimitReader(f, 1<<20))
				f.Close()
				if err != nil {
					return fmt.Errorf("read %s: %w", other, err)
				}
				for id, p := range exportFSIDs(string(b)) {
					if q, ok := mine[id]; ok && q != p {
						return fmt.Errorf("%w: fsid=%s is already set by %s (for %s); each exported folder needs its own", errFSIDInUse, id, other, p)
					}
				}
			}
		}
	}
	return a.writeConfig(rel, data)
}
