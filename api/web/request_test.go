package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
)

func TestJSONPathDropsEmbeddedStructs(t *testing.T) {
	type location struct {
		Port *int64 `json:"port"`
	}
	type client struct {
		ReadOnly *bool `json:"read_only"`
	}
	type input struct {
		Clients *[]client `json:"clients"`
		location
	}
	typ := reflect.TypeOf(&input{})
	require.Equal(t, "port", jsonPath(typ, "location.port"))
	require.Equal(t, "clients.read_only", jsonPath(typ, "clients.read_only"))
	require.Equal(t, "unknown.x", jsonPath(typ, "unknown.x"))
}

func bindBody(t *testing.T, body string) error {
	t.Helper()
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	var dst struct {
		Label   *string  `json:"label"`
		Name    *string  `json:"name"`
		Paths   []string `json:"paths"`
		Profile struct {
			Timezone string `json:"timezone"`
		} `json:"profile"`
		Extra map[string]any `json:"extra"`
	}
	return Bind(c, &dst)
}

// TestBindRefusesBadText: text no database stores as sent is refused with
// 400 before any handler sees it, never replaced or stored.
func TestBindRefusesBadText(t *testing.T) {
	for _, tc := range []struct {
		body  string
		field string // "" for a detail error
	}{
		{"{\"label\": \"a\xffb\"}", ""},                             // invalid UTF-8
		{`{"label": "a\ud800b"}`, ""},                               // half a surrogate pair
		{`{"label": "a\udc00"}`, ""},                                // the other half alone
		{`{"label": "\ud83d"}`, ""},                                 // high half at the end of a string
		{`{"label": "a\u0000b"}`, "label"},                          // NUL
		{`{"profile": {"timezone": "\u0000"}}`, "profile.timezone"}, // nested NUL
		{`{"paths": ["/a", "/b\u0000"]}`, "paths[1]"},
		{`{"extra": {"a\u0000": 1}}`, "extra.a"},
		{`{"label": "` + strings.Repeat("l", MaxLabelLen+1) + `"}`, "label"},
		{`{"name": "` + strings.Repeat("n", MaxNameLen+1) + `"}`, "name"},
		{`{"paths": ["/` + strings.Repeat("p", MaxPathLen) + `"]}`, "paths[0]"},
		{`{"extra": {"x": "` + strings.Repeat("x", MaxStringLen+1) + `"}}`, "extra.x"},
		{`{"extra": {"` + strings.Repeat("k", MaxLabelLen+1) + `": 1}}`, "extra.kkk"},
	} {
		err := bindBody(t, tc.body)
		require.Error(t, err, trim(tc.body))
		status, body := status(err)
		require.Equal(t, http.StatusBadRequest, status, trim(tc.body))
		if tc.field != "" {
			fields, _ := body.(map[string][]string)
			var named []string
			for f := range fields {
				if strings.HasPrefix(f, tc.field) {
					named = append(named, f)
				}
			}
			require.NotEmpty(t, named, "%s: %v", trim(tc.body), body)
		}
	}
	for _, ok := range []string{
		`{"label": "été 😀 \ud83d\ude00"}`, `{"label": "a\\ud800"}`, `{"label": "a\\\\u0000"}`,
		`{"label": "` + strings.Repeat("é", MaxLabelLen) + `"}`,
		`{"paths": ["/` + strings.Repeat("p", MaxPathLen-1) + `"]}`,
	} {
		require.NoError(t, bindBody(t, ok), trim(ok))
	}
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func TestCheckURLText(t *testing.T) {
	for _, tc := range []struct {
		target string
		param  string
		nul    bool
	}{
		{"/api/x%00y/", "", true},
		{"/api/x%ffy/", "", false},
		{"/api/x/?name=a%00", "name", true},
		{"/api/x/?name=a%ff", "name", false},
		{"/api/x/?a%ff=1", "a?", false},
	} {
		u, err := url.ParseRequestURI(tc.target)
		require.NoError(t, err)
		bad := CheckURLText(u)
		require.NotNil(t, bad, tc.target)
		require.Equal(t, tc.param, bad.Param, tc.target)
		require.Equal(t, tc.nul, bad.NUL, tc.target)
	}
	u, _ := url.ParseRequestURI("/api/été/?name=%C3%A9t%C3%A9")
	require.Nil(t, CheckURLText(u))
}

func TestCleanErrorText(t *testing.T) {
	for in, want := range map[string]string{
		"activity error (type: RunStep, scheduledEventID: 12, startedEventID: 13, identity: 7@h@): disk full (type: *fs.PathError, retryable: true)":                                                                                                                                   "disk full",
		"workflow execution error (type: BrowseWorkflow, workflowID: browse-1, runID: 9): activity error (type: ListDir, scheduledEventID: 5, startedEventID: 6, identity: x): \"/a\": path leaves the site root (type: BadPath, retryable: false): \"/a\": path leaves the site root": "\"/a\": path leaves the site root: \"/a\": path leaves the site root",
		"activity error (type: RunStep, scheduledEventID: 1, startedEventID: 0, identity: ): activity ScheduleToClose timeout (type: ScheduleToClose)":                                                                                                                                 "activity ScheduleToClose timeout",
		"sync_nas_users: s1: activity error (type: ApplyNASUsers, scheduledEventID: 5, startedEventID: 6, identity: i): no such group (type: BadInput, retryable: false); s2: ok":                                                                                                      "sync_nas_users: s1: no such group; s2: ok",
		"invalid: not finished within task_invalidation_timeout (24h0m0s) of being handed to site s1":                                                                                                                                                                                  "invalid: not finished within task_invalidation_timeout (24h0m0s) of being handed to site s1",
	} {
		require.Equal(t, want, CleanErrorText(in))
	}
}
