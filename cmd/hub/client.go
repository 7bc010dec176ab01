package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// The client commands (hub client …) talk to a hub's JSON API over HTTP
// as a user does; they share nothing with the server side but the
// binary. docs/cli.md describes them.

// Exit codes of hub client beyond 0 (done) and 1 (the command failed).
const (
	exitJobFailed      = 2 // a watched job ended FAILURE or CANCELLED
	exitJobHasFailures = 3 // a watched job ended SUCCESS with failed paths
)

// exitError ends the process with code after printing its message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// ExitCode is the process's exit code for err (1 for any other error).
func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}

// clientOptions are the flags every client command shares.
type clientOptions struct {
	URL     string
	JSON    bool
	Timeout time.Duration
}

func clientCmd() *cobra.Command {
	o := &clientOptions{}
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Use a hub as a user: log in, submit and watch jobs, browse files",
		Long: "The hub's command-line client. It talks to the hub API at --url (HUB_URL) and keeps\n" +
			"its tokens in the user's configuration directory (" + filepath.Join("<config dir>", "hub", credentialsFile) + ").",
		Args: cobra.NoArgs,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.URL, "url", env("HUB_URL", "http://127.0.0.1:8080"), "the hub API's base URL [HUB_URL]")
	f.BoolVar(&o.JSON, "json", false, "print the API's JSON instead of tables")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Second, "how long one request may take")
	cmd.AddCommand(loginCmd(o), logoutCmd(o), clientJobsCmd(o), clientFilesCmd(o))
	return cmd
}

// credentialsFile holds the token pairs by server URL, readable by the
// user only.
const credentialsFile = "credentials.json"

type savedTokens struct {
	Username string `json:"username"`
	Access   string `json:"access"`
	Refresh  string `json:"refresh"`
}

// credentialsPath is <user config dir>/hub/credentials.json.
func credentialsPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the user's configuration directory: %w", err)
	}
	return filepath.Join(dir, "hub", credentialsFile), nil
}

func loadCredentials() (map[string]savedTokens, error) {
	p, err := credentialsPath()
	if err != nil {
		return nil, err
	}
	out := map[string]savedTokens{}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	} else if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v): remove it and log in again", p, err)
	}
	return out, nil
}

// saveCredentials writes the tokens of server (nil: forget them) through a
// temporary file, so a crash never leaves half a file.
func saveCredentials(server string, t *savedTokens) error {
	all, err := loadCredentials()
	if err != nil {
		return err
	}
	if t == nil {
		delete(all, server)
	} else {
		all[server] = *t
	}
	p, err := credentialsPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), credentialsFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// apiClient calls the hub API with the saved access token, refreshing it
// once with the refresh token when the hub says it has expired.
type apiClient struct {
	base   string
	http   *http.Client
	tokens savedTokens
}

func newAPIClient(o *clientOptions, needLogin bool) (*apiClient, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: give the hub's base URL, such as http://127.0.0.1:8080", o.URL)
	}
	c := &apiClient{base: strings.TrimSuffix(o.URL, "/"), http: &http.Client{Timeout: o.Timeout}}
	if !needLogin {
		return c, nil
	}
	all, err := loadCredentials()
	if err != nil {
		return nil, err
	}
	t, ok := all[c.base]
	if !ok {
		return nil, fmt.Errorf("not logged in to %s: run hub client login", c.base)
	}
	c.tokens = t
	return c, nil
}

// apiError is an error answer of the API: its status and its JSON body.
type apiError struct {
	Status int
	Body   map[string]any
}

func (e *apiError) Error() string {
	if d, ok := e.Body["detail"].(string); ok {
		return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), d)
	}
	var parts []string
	for k, v := range e.Body {
		msgs, _ := v.([]any)
		var s []string
		for _, m := range msgs {
			s = append(s, fmt.Sprint(m))
		}
		if len(s) == 0 {
			s = []string{fmt.Sprint(v)}
		}
		parts = append(parts, k+": "+strings.Join(s, " "))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), strings.Join(parts, "; "))
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	status, data, err := c.send(ctx, method, path, body)
	if err == nil && status == http.StatusUnauthorized && c.tokens.Refresh != "" {
		if err := c.refresh(ctx); err != nil {
			return err
		}
		status, data, err = c.send(ctx, method, path, body)
	}
	if err != nil {
		return err
	}
	if status >= 400 {
		e := &apiError{Status: status, Body: map[string]any{}}
		if json.Unmarshal(data, &e.Body) != nil {
			e.Body = map[string]any{"detail": strings.TrimSpace(string(data))}
		}
		return e
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

func (c *apiClient) send(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.tokens.Access != "" {
		req.Header.Set("Authorization", "Bearer "+c.tokens.Access)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("the hub at %s does not answer: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// refresh exchanges the refresh token for a new access token and saves
// it; an expired refresh token means logging in again.
func (c *apiClient) refresh(ctx context.Context) error {
	var out struct {
		Access string `json:"access"`
	}
	status, data, err := c.sendAnonymous(ctx, "/api/auth/token/refresh/", map[string]string{"refresh": c.tokens.Refresh})
	if err != nil {
		return err
	}
	if status != http.StatusCreated && status != http.StatusOK || json.Unmarshal(data, &out) != nil || out.Access == "" {
		return fmt.Errorf("the session at %s has expired: run hub client login", c.base)
	}
	c.tokens.Access = out.Access
	return saveCredentials(c.base, &c.tokens)
}

func (c *apiClient) sendAnonymous(ctx context.Context, path string, body any) (int, []byte, error) {
	saved := c.tokens.Access
	c.tokens.Access = ""
	defer func() { c.tokens.Access = saved }()
	return c.send(ctx, http.MethodPost, path, body)
}

func loginCmd(o *clientOptions) *cobra.Command {
	var username string
	var passwordStdin bool
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in and keep the token pair in the user's configuration directory",
		Long: "Log in with a user name and password. The password is asked for on a terminal, read from\n" +
			"standard input with --password-stdin, or taken from HUB_PASSWORD.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newAPIClient(o, false)
			if err != nil {
				return err
			}
			if username == "" {
				return fmt.Errorf("--username is required")
			}
			password, err := readPassword(cmd, passwordStdin)
			if err != nil {
				return err
			}
			var pair savedTokens
			status, data, err := c.sendAnonymous(cmd.Context(), "/api/auth/token/", map[string]string{"username": username, "password": password})
			if err != nil {
				return err
			}
			if status != http.StatusCreated && status != http.StatusOK {
				e := &apiError{Status: status, Body: map[string]any{}}
				_ = json.Unmarshal(data, &e.Body)
				return fmt.Errorf("login refused: %w", e)
			}
			if err := json.Unmarshal(data, &pair); err != nil || pair.Access == "" || pair.Refresh == "" {
				return fmt.Errorf("login: the hub answered no token pair")
			}
			pair.Username = username
			if err := saveCredentials(c.base, &pair); err != nil {
				return fmt.Errorf("keep the tokens: %w", err)
			}
			p, _ := credentialsPath()
			fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %s (tokens kept in %s).\n", c.base, username, p)
			return nil
		},
	}
	cmd.Flags().StringVar(&username, "username", env("HUB_USERNAME", ""), "user name [HUB_USERNAME]")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from standard input")
	return cmd
}

// readPassword takes the password from HUB_PASSWORD, standard input
// (--password-stdin), or a prompt without echo on a terminal.
func readPassword(cmd *cobra.Command, fromStdin bool) (string, error) {
	if !fromStdin {
		if p := os.Getenv("HUB_PASSWORD"); p != "" {
			return p, nil
		}
	}
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && !fromStdin && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(cmd.ErrOrStderr(), "Password: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
		return string(b), err
	}
	if !fromStdin {
		return "", fmt.Errorf("no password: use --password-stdin, HUB_PASSWORD or a terminal")
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("read the password from standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func logoutCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the tokens kept for --url",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newAPIClient(o, false)
			if err != nil {
				return err
			}
			return saveCredentials(c.base, nil)
		},
	}
}

// printJSON prints v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
