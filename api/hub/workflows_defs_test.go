package hub_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

func workflowPath(id any) string { return "/api/workflows/" + catID(id) + "/" }

func TestWorkflowDefinitions(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		// Built-ins are seeded once, whatever the number of starts.
		require.NoError(t, models.EnsureBuiltinWorkflows(t.Context(), e.DB))
		r := e.AsAdmin(http.MethodGet, "/api/workflows/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(5), r.Map()["count"])
		byName := map[string]map[string]any{}
		for _, w := range r.Map()["results"].([]any) {
			byName[w.(map[string]any)["name"].(string)] = w.(map[string]any)
		}
		for _, name := range []string{"migrate", "premigrate", "recall", "send", "site_sync"} {
			require.Contains(t, byName, name)
			require.Equal(t, true, byName[name]["builtin"])
		}
		require.Equal(t, "recursive", byName["migrate"]["discovery"])
		require.Equal(t, "recursive", byName["send"]["discovery"], "sending a folder sends its tree")
		require.Equal(t, "snapdiff", byName["site_sync"]["discovery"])
		sendRules := byName["send"]["filter_rules"].([]any)
		require.Equal(t, "$destination_site", sendRules[0].(map[string]any)["action"].([]any)[0].(map[string]any)["params"].(map[string]any)["destination_site"])

		// Create with every field; read-only fields are ignored.
		body := map[string]any{
			"name": "archive-1", "label": "Archive", "discovery": "recursive",
			"discovery_options": map[string]any{"follow": false}, "icon_classes": []string{"fa", "fa-box"},
			"fields": map[string]any{
				"target":  map[string]any{"type": "text", "label": "Target", "required": true},
				"stub":    map[string]any{"type": "number", "label": "Stub size", "default": 4096},
				"wipe":    map[string]any{"type": "checkbox", "label": "Delete remote", "default": false},
				"pref":    map[string]any{"type": "choice", "label": "Preference", "choices": []string{"newest", "local"}, "default": "local"},
				"comment": map[string]any{"type": "text", "label": "Comment"},
			},
			"filter_rules": []any{
				map[string]any{"type": "file", "state": "resident", "action": []any{
					map[string]any{"name": "premigrate", "params": map[string]any{"target": "$target", "overwrite": true}},
					map[string]any{"name": "migrate", "params": map[string]any{"target": "$target", "stub_size": "$stub", "premigrate": false}},
				}},
				map[string]any{"action": []any{map[string]any{"name": "reverse_stub"}}},
				map[string]any{"type": "symlink", "state": "any", "action": []any{map[string]any{"name": "delete", "params": map[string]any{"remote": "$wipe"}}}},
			},
			"enabled": false, "visible": false, "schedule_only": true, "external_only": true, "preferred_queue": "fast",
			"id": 999, "builtin": true, "url": "x",
		}
		r = e.AsAdmin(http.MethodPost, "/api/workflows/", body)
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		w := r.Map()
		require.NotEqual(t, float64(999), w["id"])
		require.Equal(t, false, w["builtin"])
		require.Equal(t, true, w["external_only"])
		require.Equal(t, "fast", w["preferred_queue"])
		require.Equal(t, []any{"fa", "fa-box"}, w["icon_classes"])
		rules := w["filter_rules"].([]any)
		require.Len(t, rules, 3)
		require.Equal(t, "all", rules[1].(map[string]any)["type"], "missing type means all")
		require.Equal(t, "any", rules[1].(map[string]any)["state"], "missing state means any")
		path := workflowPath(w["id"])
		r = e.AsAdmin(http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "Archive", r.Map()["label"])
		require.Equal(t, float64(4096), r.Map()["fields"].(map[string]any)["stub"].(map[string]any)["default"])

		// Filters.
		for q, want := range map[string]float64{"?enabled=false": 1, "?enabled=true": 5, "?visible=false": 1, "?visible=true&enabled=true": 5} {
			r = e.AsAdmin(http.MethodGet, "/api/workflows/"+q, nil)
			require.Equal(t, http.StatusOK, r.Status, q)
			require.Equal(t, want, r.Map()["count"], q)
		}
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, "/api/workflows/?enabled=maybe", nil).Status)

		// PATCH changes what is sent; external_only is ignored on PATCH.
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"label": "Archive 2", "enabled": true, "external_only": false, "discovery": nil})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, "Archive 2", r.Map()["label"])
		require.Equal(t, true, r.Map()["enabled"])
		require.Equal(t, true, r.Map()["external_only"])
		require.Nil(t, r.Map()["discovery"])
		require.Len(t, r.Map()["filter_rules"], 3, "rules untouched")

		// Removing a field that rules reference is refused, naming the rule.
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"fields": map[string]any{}})
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Contains(t, r.Map(), "filter_rules[0].action[0].params.target")

		// Unique name.
		r = e.AsAdmin(http.MethodPost, "/api/workflows/", map[string]any{"name": "archive-1", "label": "Again"})
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Contains(t, r.Map(), "name")
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"name": "migrate"})
		require.Equal(t, http.StatusBadRequest, r.Status)

		// Built-ins: editable, not renamable, not deletable.
		mig := workflowPath(byName["migrate"]["id"])
		r = e.AsAdmin(http.MethodPatch, mig, map[string]any{"enabled": false, "visible": false})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, false, r.Map()["enabled"])
		r = e.AsAdmin(http.MethodPatch, mig, map[string]any{"name": "migrate2"})
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Equal(t, http.StatusConflict, e.AsAdmin(http.MethodDelete, mig, nil).Status)
		require.NoError(t, models.EnsureBuiltinWorkflows(t.Context(), e.DB))
		require.Equal(t, false, e.AsAdmin(http.MethodGet, mig, nil).Map()["enabled"], "re-seeding keeps operator edits")

		// Permissions: a plain user reads but cannot write.
		user := apitest.Bearer(e.CreateUser("walt"))
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/workflows/", user, nil).Status)
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, path, user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPost, "/api/workflows/", user, map[string]any{"name": "x", "label": "x"}).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, path, user, map[string]any{"label": "x"}).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodDelete, path, user, nil).Status)

		// Delete; unknown ids are 404.
		require.Equal(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, path, nil).Status)
		for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
			require.Equal(t, http.StatusNotFound, e.AsAdmin(m, path, map[string]any{}).Status, m)
			require.Equal(t, http.StatusNotFound, e.AsAdmin(m, "/api/workflows/abc/", map[string]any{}).Status, m)
		}
	})
}

func TestWorkflowDefinitionValidation(t *testing.T) {
	t.Parallel()
	rule := func(typ, state string, steps ...any) map[string]any {
		return map[string]any{"type": typ, "state": state, "action": steps}
	}
	step := func(name string, params map[string]any) map[string]any {
		return map[string]any{"name": name, "params": params}
	}
	ok := rule("file", "resident", step("migrate", nil))
	cases := []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"name required", map[string]any{"label": "L"}, "name"},
		{"name pattern", map[string]any{"name": "bad name", "label": "L"}, "name"},
		{"label required", map[string]any{"name": "n"}, "label"},
		{"discovery value", map[string]any{"name": "n", "label": "L", "discovery": "walk"}, "discovery"},
		{"discovery type", map[string]any{"name": "n", "label": "L", "discovery": 3}, "discovery"},
		{"discovery_options type", map[string]any{"name": "n", "label": "L", "discovery_options": []int{1}}, "discovery_options"},
		{"icon_classes type", map[string]any{"name": "n", "label": "L", "icon_classes": "fa"}, "icon_classes"},
		{"preferred_queue pattern", map[string]any{"name": "n", "label": "L", "preferred_queue": "a b"}, "preferred_queue"},
		{"rules not a list", map[string]any{"name": "n", "label": "L", "filter_rules": map[string]any{}}, "filter_rules"},
		{"rule not an object", map[string]any{"name": "n", "label": "L", "filter_rules": []any{ok, "x"}}, "filter_rules[1]"},
		{"unknown type", map[string]any{"name": "n", "label": "L", "filter_rules": []any{ok, rule("fifo", "any", step("delete", nil))}}, "filter_rules[1].type"},
		{"unknown state", map[string]any{"name": "n", "label": "L", "filter_rules": []any{ok, rule("file", "frozen", step("delete", nil))}}, "filter_rules[1].state"},
		{"unknown rule key", map[string]any{"name": "n", "label": "L", "filter_rules": []any{map[string]any{"actions": []any{}, "action": []any{step("delete", nil)}}}}, "filter_rules[0].actions"},
		{"empty action", map[string]any{"name": "n", "label": "L", "filter_rules": []any{ok, rule("file", "any")}}, "filter_rules[1].action"},
		{"unknown step", map[string]any{"name": "n", "label": "L", "filter_rules": []any{ok, rule("file", "any", step("delete", nil), step("explode", nil))}}, "filter_rules[1].action[1].name"},
		{"unknown param", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("file", "any", step("recall", map[string]any{"fast": true}))}}, "filter_rules[0].action[0].params.fast"},
		{"bool param type", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("file", "any", step("recall", map[string]any{"delete_on_recall": "yes"}))}}, "filter_rules[0].action[0].params.delete_on_recall"},
		{"int param type", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("file", "any", step("migrate", map[string]any{"stub_size": 1.5}))}}, "filter_rules[0].action[0].params.stub_size"},
		{"int param range", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("file", "any", step("migrate", map[string]any{"stub_size": -1}))}}, "filter_rules[0].action[0].params.stub_size"},
		{"string param type", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("file", "any", step("migrate", map[string]any{"target": 7}))}}, "filter_rules[0].action[0].params.target"},
		{"enum param", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("all", "any", step("site_sync", map[string]any{"destination_site": "b", "sync_preference": "oldest"}))}}, "filter_rules[0].action[0].params.sync_preference"},
		{"required param", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("all", "any", step("send", map[string]any{"hydrate": true}))}}, "filter_rules[0].action[0].params.destination_site"},
		{"path param relative", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("all", "any", step("send", map[string]any{"destination_site": "b", "destination_path": "../x"}))}}, "filter_rules[0].action[0].params.destination_path"},
		{"path param dotdot", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("all", "any", step("site_sync", map[string]any{"destination_site": "b", "destination_path": "/a/../../x"}))}}, "filter_rules[0].action[0].params.destination_path"},
		{"params type", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("all", "any", step("send", nil), map[string]any{"name": "delete", "params": []any{}})}}, "filter_rules[0].action[1].params"},
		{"missing field ref", map[string]any{"name": "n", "label": "L", "filter_rules": []any{rule("all", "any", step("send", map[string]any{"destination_site": "$dest"}))}}, "filter_rules[0].action[0].params.destination_site"},
		{"field ref type", map[string]any{"name": "n", "label": "L",
			"fields":       map[string]any{"dest": map[string]any{"type": "checkbox", "label": "D"}},
			"filter_rules": []any{rule("all", "any", step("send", map[string]any{"destination_site": "$dest"}))}}, "filter_rules[0].action[0].params.destination_site"},
		{"fields type", map[string]any{"name": "n", "label": "L", "fields": []any{}}, "fields"},
		{"field name", map[string]any{"name": "n", "label": "L", "fields": map[string]any{"a-b": map[string]any{"type": "text", "label": "x"}}}, "fields.a-b"},
		{"field type", map[string]any{"name": "n", "label": "L", "fields": map[string]any{"a": map[string]any{"type": "date", "label": "x"}}}, "fields.a.type"},
		{"field label", map[string]any{"name": "n", "label": "L", "fields": map[string]any{"a": map[string]any{"type": "text"}}}, "fields.a.label"},
		{"field required type", map[string]any{"name": "n", "label": "L", "fields": map[string]any{"a": map[string]any{"type": "text", "label": "x", "required": "yes"}}}, "fields.a.required"},
		{"choice needs choices", map[string]any{"name": "n", "label": "L", "fields": map[string]any{"a": map[string]any{"type": "choice", "label": "x"}}}, "fields.a.choices"},
		{"choices only for choice", map[string]any{"name": "n", "label": "L", "fields": map[string]any{"a": map[string]any{"type": "text", "label": "x", "choices": []string{"a"}}}}, "fields.a.choices"},
		{"default type", map[string]any{"name": "n", "label": "L", "fields": map[string]any{"a": map[string]any{"type": "number", "label": "x", "default": "3"}}}, "fields.a.default"},
		{"default in choices", map[string]any{"name": "n", "label": "L", "fields": map[string]any{"a": map[string]any{"type": "choice", "label": "x", "choices": []string{"a"}, "default": "b"}}}, "fields.a.default"},
		{"wrong JSON type", map[string]any{"name": "n", "label": "L", "enabled": "yes"}, "enabled"},
	}
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		for _, tc := range cases {
			r := e.AsAdmin(http.MethodPost, "/api/workflows/", tc.body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", tc.name, r.Body)
			require.Contains(t, r.Map(), tc.field, "%s: %s", tc.name, r.Body)
		}
		r := e.AsAdmin(http.MethodGet, "/api/workflows/", nil)
		require.Equal(t, float64(5), r.Map()["count"], "nothing was created")
	})
}
