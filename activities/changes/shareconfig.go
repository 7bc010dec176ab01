package changes

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
)

// NFSShareConfig turns an NFS share into the export rules its sites write
// (docs/catalogue-storage.md lists the mapping).
func NFSShareConfig(sh *models.NFSShare) site.ShareConfig {
	cfg := site.ShareConfig{Kind: site.ShareNFS, ID: sh.ID, Path: sh.Path}
	pick := func(on bool, yes, no string) string {
		if on {
			return yes
		}
		return no
	}
	for _, c := range sh.Clients {
		opts := []string{pick(c.ReadOnly, "ro", "rw"), pick(c.Asynchronous, "async", "sync"),
			pick(c.SubtreeCheck, "subtree_check", "no_subtree_check"), pick(c.WriteDelay, "wdelay", "no_wdelay"),
			pick(c.InsecurePorts, "insecure", "secure")}
		if c.ForceRootUserID {
			opts = append(opts, "root_squash")
		}
		if c.ForceAllUserID {
			opts = append(opts, "all_squash")
		}
		for _, n := range []struct {
			name string
			v    *int64
		}{{"anonuid", c.AnonymousUserID}, {"anongid", c.AnonymousGroupID}, {"fsid", c.FSID}} {
			if n.v != nil {
				opts = append(opts, n.name+"="+strconv.FormatInt(*n.v, 10))
			}
		}
		for _, kv := range settingsPairs(c.AdvancedSettings, "") {
			if kv.Value == "" {
				opts = append(opts, kv.Key)
			} else {
				opts = append(opts, kv.Key+"="+kv.Value)
			}
		}
		cfg.NFSClients = append(cfg.NFSClients, site.NFSExportClient{Hosts: c.Hosts, Options: strings.Join(opts, ",")})
	}
	return cfg
}

// SMBShareConfig turns an SMB share into the share section its sites
// write (docs/catalogue-storage.md lists the mapping).
func SMBShareConfig(sh *models.SMBShare) site.ShareConfig {
	yesNo := map[bool]string{true: "yes", false: "no"}
	params := []site.SMBParam{{Key: "read only", Value: yesNo[sh.ReadOnly]}, {Key: "browseable", Value: yesNo[sh.Visible]},
		{Key: "guest ok", Value: yesNo[sh.GuestOK]}}
	add := func(key, value string) {
		if value != "" {
			params = append(params, site.SMBParam{Key: key, Value: value})
		}
	}
	add("create mask", sh.CreateMask)
	add("directory mask", sh.DirectoryMask)
	add("force create mode", sh.ForceCreateMode)
	add("force directory mode", sh.ForceDirectoryMode)
	add("admin users", strings.Join(objectNames(sh.AdminUsers), " "))
	add("valid users", strings.Join(objectNames(sh.AllowedUsers), " "))
	add("hosts allow", strings.Join(objectNames(sh.HostsAllow), " "))
	add("hosts deny", strings.Join(objectNames(sh.HostsDeny), " "))
	params = append(params, settingsPairs(sh.AdvancedSettings, "yes")...)
	return site.ShareConfig{Kind: site.ShareSMB, ID: sh.ID, Path: sh.Path, SMBName: sh.Name, SMBParams: params}
}

// objectNames reads the names a share's user or host object lists: the
// keys set to true and the strings of its string and array values
// ({"users": ["alice"], "bob": true} → alice, bob), sorted.
func objectNames(m map[string]any) []string {
	var out []string
	for k, v := range m {
		switch v := v.(type) {
		case bool:
			if v {
				out = append(out, k)
			}
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// settingsPairs turns advanced settings into sorted key/value options:
// true gives the key alone (or with trueValue), false and null drop it.
func settingsPairs(m map[string]any, trueValue string) []site.SMBParam {
	var out []site.SMBParam
	for k, v := range m {
		switch v := v.(type) {
		case nil:
		case bool:
			if v {
				out = append(out, site.SMBParam{Key: k, Value: trueValue})
			} else if trueValue != "" {
				out = append(out, site.SMBParam{Key: k, Value: "no"})
			}
		default:
			out = append(out, site.SMBParam{Key: k, Value: fmt.Sprint(v)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
