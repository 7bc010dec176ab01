package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

func TestPagination(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		// 130 users in all with admin.
		for i := 0; i < 129; i++ {
			u := &models.User{Username: fmt.Sprintf("user%03d", i), IsActive: true}
			require.NoError(t, models.CreateUser(context.Background(), e.DB, u, nil, 0))
		}
		get := func(q string) apitest.Response { return e.AsAdmin(http.MethodGet, "/api/users/"+q, nil) }
		cases := []struct {
			query string
			n     int
			next  bool
			prev  bool
		}{
			{"", 20, true, false},
			{"?page_size=5", 20, true, false},
			{"?page_size=abc", 20, true, false},
			{"?page_size=-3", 20, true, false},
			{"?page_size=50", 50, true, false},
			{"?page_size=500", 100, true, false},
			{"?page_size=0", 130, false, false},
			{"?page=2&page_size=100", 30, false, true},
			{"?page=7", 10, false, true},
			{"?page=3&page_size=0", 130, false, false}, // no pagination: page is ignored
		}
		for _, tc := range cases {
			r := get(tc.query)
			require.Equal(t, http.StatusOK, r.Status, tc.query)
			m := r.Map()
			require.Equal(t, float64(130), m["count"], tc.query)
			require.Len(t, m["results"], tc.n, tc.query)
			require.Equal(t, tc.next, m["next"] != nil, tc.query)
			require.Equal(t, tc.prev, m["previous"] != nil, tc.query)
		}
		next := get("?page_size=50").Map()["next"].(string)
		require.True(t, strings.HasPrefix(next, e.URL+"/api/users/?"), next)
		require.Contains(t, next, "page=2")
		require.Contains(t, next, "page_size=50")

		for _, q := range []string{"?page=8", "?page=0", "?page=x", "?page=-1"} {
			r := get(q)
			require.Equal(t, http.StatusNotFound, r.Status, q)
			require.Contains(t, r.Map(), "detail")
		}
	})
}

func TestErrorConventions(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	r := e.AsAdmin(http.MethodGet, "/api/no-such-thing/", nil)
	require.Equal(t, http.StatusNotFound, r.Status)
	require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"))
	require.Contains(t, r.Map(), "detail")

	r = e.AsAdmin(http.MethodPut, "/api/users/", map[string]any{})
	require.Equal(t, http.StatusMethodNotAllowed, r.Status)
	require.Contains(t, r.Map(), "detail")

	r = e.Do(http.MethodGet, "/api/users/", "", nil)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.NotEmpty(t, r.Header.Get("WWW-Authenticate"))
	require.Contains(t, r.Map(), "detail")
	require.NotEmpty(t, r.Header.Get("X-Request-ID"))

	// Bodies of every shape of garbage are 400 with a JSON body, never 500.
	for _, body := range []string{"{", "null", "[]", `"str"`, "123", `{"username": ["a"]}`, `{"username":"x"} trailing`, "\x00\xff"} {
		r := e.AsAdmin(http.MethodPost, "/api/users/", body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", body, r.Body)
		require.NotNil(t, r.Map(), "%q", body)
	}
	// Missing trailing slash is not silently redirected.
	require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/users", nil).Status)
}
