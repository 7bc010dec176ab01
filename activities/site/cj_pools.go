package site

import (
	"context"
	"fmt"
)

// CJPool is a storage pool of the site, reported as a C+J datastore.
type CJPool struct {
	Name       string
	Filesystem string
	Capacity   int64 // bytes
	FreeSpace  int64 // bytes available to unprivileged users
	UsedSpace  int64 // bytes
}

// cjPoolName is the name of the pool backing the site root; GPFS calls its
// default pool "system", and profiles refer to pools by such names.
const cjPoolName = "system"

// CJStatPools reports the site's storage pools: the filesystem holding the
// site root, measured with statfs.
func (a *Activities) CJStatPools(ctx context.Context) ([]CJPool, error) {
	p, err := cjStatfs(a.Root.Dir())
	if err != nil {
		return nil, fmt.Errorf("statfs %s: %w", a.Root.Dir(), err)
	}
	p.Name = cjPoolName
	return []CJPool{p}, nil
}
