package hub_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// TestCachedCallersSeeChangesAtOnce: callers are cached by credential
// (api/auth principalCache), yet a change to users, groups, permissions
// or keys counts from the very next request, even one written straight
// into the database as another hub process would (the statements below
// go around this server). A login, which writes last_login, does not
// empty the cache.
func TestCachedCallersSeeChangesAtOnce(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		frank := apitest.Bearer(e.CreateUser("frank"))
		sites := func(auth string) int { return e.Do(http.MethodGet, "/api/sites/", auth, nil).Status }
		for range 3 {
			require.Equal(t, http.StatusOK, sites(frank))
		}
		u, err := models.GetUser(ctx, e.DB, "frank")
		require.NoError(t, err)

		// Logins write last_login and leave the generation alone.
		before, err := models.ReadGenerations(ctx, e.DB)
		require.NoError(t, err)
		e.Login("frank", "password-frank")
		after, err := models.ReadGenerations(ctx, e.DB)
		require.NoError(t, err)
		require.Equal(t, before.Auth, after.Auth, "a login does not move the generation")

		// Out of every group: no permission left, at once.
		_, err = e.DB.NewDelete().Table("user_groups").Where("user_id = ?", u.ID).Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, sites(frank))

		// Back in Users, then deactivated: 401 at once.
		r := e.AsAdmin(http.MethodPatch, "/api/users/frank/", map[string]any{"groups": []string{models.GroupUsers}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, http.StatusOK, sites(frank))
		_, err = e.DB.NewUpdate().Table("users").Set("is_active = ?", false).Where("id = ?", u.ID).Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, sites(frank))
		_, err = e.DB.NewUpdate().Table("users").Set("is_active = ?", true).Where("id = ?", u.ID).Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, sites(frank))

		// A client key deleted behind the server's back: 401 at once.
		r = e.Do(http.MethodPost, "/api/auth/clientkeys/", frank, map[string]string{"name": "ci"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		key := "Api-Key " + r.Map()["api_key"].(string)
		require.Equal(t, http.StatusOK, sites(key))
		require.Equal(t, http.StatusOK, sites(key))
		_, err = e.DB.NewDelete().Table("client_keys").Where("user_id = ?", u.ID).Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, sites(key))

		// A superuser made an ordinary user loses what only superusers had.
		_, err = e.DB.NewUpdate().Table("users").Set("is_superuser = ?", true).Where("id = ?", u.ID).Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/users/", frank, nil).Status)
		_, err = e.DB.NewUpdate().Table("users").Set("is_superuser = ?", false).Where("id = ?", u.ID).Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, "/api/users/", frank, nil).Status)
	})
}
