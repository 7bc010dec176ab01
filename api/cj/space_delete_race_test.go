package cj_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/cj"
	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/models"
)

// Deleting a space and creating a snapshot or an exposer of it, at the
// same moment, used to both succeed (a reviewer's finding): each request
// checked the other's item before its own transaction ("no snapshot or
// exposer uses the space", "the space exists"), so the space's folder
// went while a snapshot of it was still to be taken; once a new space
// took the name, the old snapshot copied the new space's data and kept
// the new space from being deleted. The tests below run the other request
// in the gap between a request's checks and its transaction
// (cj.SetChecked), where only the checks made again inside the
// transaction can see it.

// newItemOf is the create body of a snapshot or an exposer of space.
func newItemOf(typ, name, space string) map[string]any {
	if typ == models.CJExposers {
		return map[string]any{"type": "nfs", "name": name, "space": space}
	}
	return map[string]any{"name": name, "space": space}
}

// TestSpaceDeleteIsRefusedWhenASnapshotOrExposerOfItIsCreatedMeanwhile
// checks that a space's DELETE that passed its "nothing uses it" check,
// and then sees a snapshot (or exposer) of the space created before its
// transaction, answers 409 and leaves the space and the new item be.
func TestSpaceDeleteIsRefusedWhenASnapshotOrExposerOfItIsCreatedMeanwhile(t *testing.T) {
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		for _, typ := range []string{models.CJSnapshots, models.CJExposers} {
			space := "racy-" + typ
			sp, _ := e.Create("spaces", map[string]any{"name": space})
			e.WaitStatus(sp, models.CJActive)
			var once sync.Once
			var created cjtest.Response
			cj.SetChecked(e.API, func(op string, it *models.CJItem) {
				if op == "delete" && it.Type == models.CJSpaces && it.Name == space {
					once.Do(func() { created = e.Do(http.MethodPost, "/"+typ+"/", e.Admin, newItemOf(typ, "late", space)) })
				}
			})
			cur := e.Do(http.MethodGet, sp, e.Admin, nil).Item()
			r := e.Do(http.MethodDelete, sp, e.Admin, nil, "If-Match", cur["_etag"].(string))
			cj.SetChecked(e.API, nil)
			require.Equal(t, http.StatusAccepted, created.Status, "%s: %s", typ, created.Body)
			require.Equal(t, http.StatusConflict, r.Status, "%s: the space's deletion must see the %s created meanwhile: %s", typ, typ, r.Body)
			require.Contains(t, r.Error().Message, `"late"`)
			require.Equal(t, http.StatusOK, e.Do(http.MethodGet, sp, e.Admin, nil).Status, "the space stays")
			e.WaitStatus(created.Header.Get("Location"), models.CJActive)
		}
	})
}

// TestSnapshotOrExposerCreateIsRefusedWhenItsSpaceIsDeletedMeanwhile
// checks that a snapshot's (or exposer's) POST that passed its "the space
// exists" check, and whose space's deletion is then accepted before its
// transaction, answers 422 on space and stores nothing.
func TestSnapshotOrExposerCreateIsRefusedWhenItsSpaceIsDeletedMeanwhile(t *testing.T) {
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		for _, typ := range []string{models.CJSnapshots, models.CJExposers} {
			space := "gone-" + typ
			sp, _ := e.Create("spaces", map[string]any{"name": space})
			e.WaitStatus(sp, models.CJActive)
			var once sync.Once
			var deleted cjtest.Response
			cj.SetChecked(e.API, func(op string, it *models.CJItem) {
				if op == "create" && it.Type == typ && it.Name == "late" {
					once.Do(func() { deleted = e.Do(http.MethodDelete, sp, e.Admin, nil, "If-Match", "*") })
				}
			})
			r := e.Do(http.MethodPost, "/"+typ+"/", e.Admin, newItemOf(typ, "late", space))
			cj.SetChecked(e.API, nil)
			require.Equal(t, http.StatusNoContent, deleted.Status, "%s: %s", typ, deleted.Body)
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: a %s of a space whose deletion was accepted must be refused: %s", typ, typ, r.Body)
			require.Contains(t, string(r.Body), "no space is named")
			e.WaitGone(sp)
			for _, it := range e.Do(http.MethodGet, "/"+typ+"/", e.Admin, nil).Items() {
				require.NotEqual(t, space, it["space"], "no %s of the deleted space is stored", typ)
			}
			require.False(t, strings.Contains(string(e.Do(http.MethodGet, "/"+typ+"/", e.Admin, nil).Body), `"late"`))
		}
	})
}
