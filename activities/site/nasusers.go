package site

import (
	"context"
	"encoding/json"
)

// NASUser is a hub user as a site's NAS needs it.
type NASUser struct {
	Username     string `json:"username"`
	UID          int64  `json:"uid"`
	PrimaryGroup string `json:"primary_group"`
	AllowSSH     bool   `json:"allow_ssh"`
}

// ApplyNASUsers replaces the site's NAS user list, <config>/nas_users.json,
// atomically; the site's account tooling reads it. Idempotent.
func (a *Activities) ApplyNASUsers(ctx context.Context, users []NASUser) (int, error) {
	if users == nil {
		users = []NASUser{}
	}
	data, err := json.MarshalIndent(users, "", "  ")
	if err != nil {
		return 0, err
	}
	return len(users), a.writeConfig("nas_users.json", append(data, '\n'))
}
