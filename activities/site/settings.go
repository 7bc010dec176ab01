package site

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
)

// SettingsFile is the name, in the site's configuration folder, of the
// settings the hub sent: one JSON object mapping keys to values.
const SettingsFile = "settings.json"

// SettingValue is a key and its new value; a null value deletes the key.
type SettingValue struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// ApplySettingsInput is what ApplySettings merges into the site's settings.
type ApplySettingsInput struct {
	Values []SettingValue `json:"values"`
}

// ApplySettingsResult says what ApplySettings changed.
type ApplySettingsResult struct {
	Set     []string `json:"set"`     // keys written
	Deleted []string `json:"deleted"` // keys removed (absent ones are not listed)
	File    string   `json:"file"`
}

// settingsMu serialises read-modify-write of settings files within one
// worker process, where several queues' activities may apply settings at
// once. Nodes of a site do not share a configuration folder.
var settingsMu sync.Mutex

func (a *Activities) settingsPath() string { return filepath.Join(a.ConfigDir, SettingsFile) }

// readSettingsFile returns the applied settings; a missing file is none.
func (a *Activities) readSettingsFile() (map[string]json.RawMessage, error) {
	name := SettingsFile
	data, err := a.readConfig(name)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%s is not a JSON object: %w", name, err)
		}
	}
	return m, nil
}

func settingIsNull(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) == 0 || string(t) == "null"
}

// ApplySettings merges the values into <config dir>/settings.json,
// deleting the keys whose value is null. The file is replaced atomically,
// and applying the same values again changes nothing, so retries are safe.
func (a *Activities) ApplySettings(ctx context.Context, in ApplySettingsInput) (ApplySettingsResult, error) {
	res := ApplySettingsResult{Set: []string{}, Deleted: []string{}, File: a.settingsPath()}
	for _, v := range in.Values {
		if !settingIsNull(v.Value) && !json.Valid(v.Value) {
			return res, fmt.Errorf("apply settings: value of %s is not valid JSON", v.Key)
		}
	}
	settingsMu.Lock()
	defer settingsMu.Unlock()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	current, err := a.readSettingsFile()
	if err != nil {
		return res, fmt.Errorf("apply settings: %w", err)
	}
	for _, v := range in.Values {
		if settingIsNull(v.Value) {
			if _, ok := current[v.Key]; ok {
				delete(current, v.Key)
				res.Deleted = append(res.Deleted, v.Key)
			}
			continue
		}
		current[v.Key] = v.Value
		res.Set = append(res.Set, v.Key)
	}
	// encoding/json sorts map keys: the file's bytes depend only on its content.
	data, err := json.MarshalIndent(current, "", "  ")
	if err != nil {
		return res, fmt.Errorf("apply settings: %w", err)
	}
	if err := a.writeConfig(SettingsFile, append(data, '\n')); err != nil {
		return res, fmt.Errorf("apply settings: write %s: %w", res.File, err)
	}
	return res, nil
}

// ReadSettings returns the settings the site applies, from
// <config dir>/settings.json.
func (a *Activities) ReadSettings(ctx context.Context) (map[string]json.RawMessage, error) {
	settingsMu.Lock()
	defer settingsMu.Unlock()
	m, err := a.readSettingsFile()
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	return m, nil
}
