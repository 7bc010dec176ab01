package main

import (
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"sigs.k8s.io/yaml"

	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// composeFile is the part of docker/compose.yaml the test reads.
type composeFile struct {
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image       string                       `json:"image"`
	Build       *struct{ Dockerfile string } `json:"build"`
	Command     []string                     `json:"command"`
	Entrypoint  []string                     `json:"entrypoint"`
	Environment map[string]string            `json:"environment"`
	DependsOn   map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Healthcheck *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
	Restart string   `json:"restart"`
	Ports   []string `json:"ports"`
	Volumes []string `json:"volumes"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("../../docker/compose.yaml")
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(raw, &f), "compose.yaml parses (anchors and merge keys included)")
	return f
}

// interpolated resolves compose's ${VAR:-default} and ${VAR:?message} the
// way an operator following the file's header would: required variables
// get the given values.
func interpolated(t *testing.T, s string, given map[string]string) string {
	t.Helper()
	re := regexp.MustCompile(`\$\{([A-Z_]+)(?::-([^}]*)|:\?[^}]*)?\}`)
	s = re.ReplaceAllStringFunc(s, func(m string) string {
		sub := re.FindStringSubmatch(m)
		if v, ok := given[sub[1]]; ok {
			return v
		}
		require.Contains(t, m, ":-", "%s has no default and the test gives no value", m)
		return sub[2]
	})
	return strings.ReplaceAll(s, "$$", "$")
}

// knownEnv is every HUB_* variable the binary reads, from its own flag
// set: each flag's usage names its variable in brackets.
func knownEnv(root *cobra.Command) map[string]string {
	known := map[string]string{}
	re := regexp.MustCompile(`\[(HUB_[A-Z0-9_]+)`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		visit := func(f *pflag.Flag) {
			for _, m := range re.FindAllStringSubmatch(f.Usage, -1) {
				known[m[1]] = c.CommandPath() + " --" + f.Name
			}
		}
		c.Flags().VisitAll(visit)
		c.PersistentFlags().VisitAll(visit)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return known
}

// TestComposeFile checks docker/compose.yaml against the binary, since
// Docker is not available to run it: every hub command and flag parses
// with the hub's own flag set, every HUB_* variable exists and holds a
// value the command accepts, healthchecks probe what the process serves,
// dependencies wait for health or completion, volumes exist and the
// image's user can write them, and the Temporal parts match the embedded
// server's release and the hub's search attributes.
func TestComposeFile(t *testing.T) {
	f := readCompose(t)
	for _, name := range []string{"postgres", "temporal-schema", "temporal", "temporal-setup", "temporal-ui",
		"serve", "hub-worker", "site1-worker", "site2-worker"} {
		require.Contains(t, f.Services, name)
	}
	given := map[string]string{"HUB_SECRET_KEY": vocab.NewSecretKey(), "HUB_ADMIN_PASSWORD": "compose-admin-1"}
	known := knownEnv(rootCmd())
	require.Contains(t, known, "HUB_OPS_ADDR")

	var hubServices []string
	for name, s := range f.Services {
		require.NotContains(t, s.Image, "auto-setup", "%s: the deprecated auto-setup image", name)
		for dep, d := range s.DependsOn {
			target, ok := f.Services[dep]
			require.True(t, ok, "%s depends on unknown service %s", name, dep)
			switch d.Condition {
			case "service_healthy":
				require.NotNil(t, target.Healthcheck, "%s waits for %s to be healthy, which has no healthcheck", name, dep)
			case "service_completed_successfully":
				require.Empty(t, target.Restart, "%s waits for %s to complete, which restarts", name, dep)
			case "service_started":
			default:
				t.Errorf("%s depends on %s with condition %q", name, dep, d.Condition)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				require.Contains(t, f.Volumes, src, "%s mounts undeclared volume %s", name, src)
			}
		}
		if s.Build != nil && s.Build.Dockerfile == "docker/Dockerfile" {
			hubServices = append(hubServices, name)
		}
	}
	sort.Strings(hubServices)
	require.Equal(t, []string{"hub-worker", "serve", "site1-worker", "site2-worker"}, hubServices)

	for _, name := range hubServices {
		s := f.Services[name]
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range s.Environment {
				require.Contains(t, known, k, "%s sets %s, which the hub does not read", name, k)
				env[k] = interpolated(t, v, given)
				t.Setenv(k, env[k])
			}
			for _, k := range []string{"HUB_TEMPORAL_ADDR", "HUB_OPS_ADDR", "HUB_SECRET_KEY", "HUB_START_TIMEOUT"} {
				require.Contains(t, env, k)
			}
			if name == "serve" || name == "hub-worker" {
				require.Contains(t, env, "HUB_DATABASE_URL")
				require.True(t, strings.HasPrefix(env["HUB_DATABASE_URL"], "postgres://hub:"), env["HUB_DATABASE_URL"])
			} else {
				require.NotContains(t, env, "HUB_DATABASE_URL", "site workers never get the hub database")
			}

			// The command, its flags and the environment pass the
			// command's own checks (what it runs before starting anything).
			root := rootCmd()
			cmd, rest, err := root.Find(s.Command)
			require.NoError(t, err)
			require.NotEqual(t, root, cmd, "%v names no hub command", s.Command)
			require.NoError(t, cmd.ParseFlags(rest), "%v", s.Command)
			require.NoError(t, cmd.ValidateArgs(cmd.Flags().Args()))
			require.NotNil(t, cmd.PreRunE)
			require.NoError(t, cmd.PreRunE(cmd, cmd.Flags().Args()), "%v", s.Command)
			if f := cmd.Flags().Lookup("api-addr"); f != nil {
				_, port, _ := strings.Cut(f.Value.String(), ":")
				require.True(t, slices.ContainsFunc(s.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) }),
					"the API port %s is published", port)
			}
			if cmd.Name() == "worker" && cmd.Flags().Lookup("site").Value.String() != "" {
				root := cmd.Flags().Lookup("root").Value.String()
				require.True(t, slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasSuffix(v, ":"+root) }),
					"the site root %s is a volume", root)
			}

			// The healthcheck asks this process's own /readyz.
			require.NotNil(t, s.Healthcheck)
			test := s.Healthcheck.Test
			require.Equal(t, []string{"CMD", "/usr/local/bin/hub", "probe", "readyz"}, test)
			probe, rest, err := rootCmd().Find(test[2:])
			require.NoError(t, err)
			require.Equal(t, "probe", probe.Name())
			require.NoError(t, probe.ParseFlags(rest))
			require.NoError(t, probe.ValidateArgs(probe.Flags().Args()))
			require.Equal(t, env["HUB_OPS_ADDR"], probe.Flags().Lookup("ops-addr").Value.String())
			require.NotEmpty(t, env["HUB_OPS_ADDR"])
		})
	}

	// Temporal: the release the hub embeds, its schema by its own tool.
	var serverVersion string
	info, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	for _, d := range info.Deps {
		if d.Path == "go.temporal.io/server" {
			serverVersion = strings.TrimPrefix(d.Version, "v")
		}
	}
	require.NotEmpty(t, serverVersion)
	for _, name := range []string{"temporal", "temporal-schema", "temporal-setup"} {
		img := interpolated(t, f.Services[name].Image, nil)
		require.True(t, strings.HasSuffix(img, ":"+serverVersion), "%s runs %s, the hub embeds Temporal %s", name, img, serverVersion)
	}
	require.True(t, strings.HasPrefix(f.Services["temporal"].Image, "temporalio/server:"))
	schema := strings.Join(f.Services["temporal-schema"].Command, "\n")
	require.Contains(t, schema, "temporal-sql-tool --plugin postgres12")
	require.Contains(t, schema, "setup-schema -v 0.0")
	require.Contains(t, schema, "update-schema -d")
	require.Equal(t, "postgres12", f.Services["temporal"].Environment["DB"])

	// The one-time setup registers exactly the hub's search attributes.
	setup := strings.Join(f.Services["temporal-setup"].Command, "\n")
	m := regexp.MustCompile(`for sa in ([^;]+);`).FindStringSubmatch(setup)
	require.NotNil(t, m, "temporal-setup lists the search attributes")
	types := map[enumspb.IndexedValueType]string{enumspb.INDEXED_VALUE_TYPE_KEYWORD: "Keyword", enumspb.INDEXED_VALUE_TYPE_INT: "Int"}
	var want, got []string
	for name, typ := range workflows.SearchAttributes {
		want = append(want, name+":"+types[typ])
	}
	got = strings.Fields(m[1])
	require.ElementsMatch(t, want, got)
	require.Contains(t, setup, "--namespace "+f.Services["serve"].Environment["HUB_TEMPORAL_NAMESPACE"])

	// The image's user owns the folders volumes are mounted on.
	dockerfile, err := os.ReadFile("../../docker/Dockerfile")
	require.NoError(t, err)
	require.Contains(t, string(dockerfile), "USER 65532:65532")
	require.Contains(t, string(dockerfile), "--chown=65532:65532 /out/data /data")
	require.Contains(t, string(dockerfile), "FROM golang:1.26.8 ")
}

// TestConfigReference checks that the README's configuration reference
// names every HUB_* variable the binary reads.
func TestConfigReference(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, ref, ok := strings.Cut(string(readme), "## Configuration reference")
	require.True(t, ok, "the README has a configuration reference")
	ref, _, _ = strings.Cut(ref, "\n## ")
	names := regexp.MustCompile(`HUB_[A-Z0-9_]+`).FindAllString(ref, -1)
	for name, flag := range knownEnv(rootCmd()) {
		require.True(t, slices.Contains(names, name), "the README's configuration reference does not name %s (%s)", name, flag)
	}
}
