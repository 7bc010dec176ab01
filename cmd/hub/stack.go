package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/thehub/hub/activities/changes"
	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/api/auth"
	cjapi "github.com/thehub/hub/api/cj"
	hubapi "github.com/thehub/hub/api/hub"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/worker/devserver"
	"github.com/thehub/hub/worker/ops"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// runDev starts everything in one process and blocks until ctx ends.
func runDev(ctx context.Context, cfg *Config) error {
	log := cfg.logger()
	cfg.HTTP.Log, cfg.Login.Log = log, log
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := cfg.openSecrets(true); err != nil {
		return err
	}
	// Bind the API ports first so a busy port fails before anything starts.
	lns, err := listenAll(cfg)
	if err != nil {
		return err
	}
	defer closeAll(lns)
	o, err := startOps(cfg, log)
	if err != nil {
		return err
	}
	defer o.stop()

	ts, err := devserver.Start(devserver.Options{
		FrontendAddr: cfg.TemporalAddr, UIAddr: cfg.TemporalUIAddr, Namespace: cfg.Namespace,
		DatabaseFile: filepath.Join(cfg.DataDir, "temporal.db"), SearchAttributes: workflows.SearchAttributes,
		Logger: log, UILimits: &cfg.HTTP,
	})
	if err != nil {
		return err
	}
	defer ts.Stop()
	cfg.TemporalAddr = ts.FrontendAddr()

	db, password, err := openHubDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := ensureDevSites(ctx, db, cfg); err != nil {
		return err
	}
	tc, err := dialTemporal(ctx, cfg, o.temporal, log)
	if err != nil {
		return err
	}
	defer tc.Close()

	var workers []sdkworker.Worker
	defer func() {
		for _, w := range workers {
			w.Stop()
		}
	}()
	hw := worker.Hub(tc, &hubact.Activities{DB: db, Secrets: cfg.secrets})
	if err := hw.Start(); err != nil {
		return fmt.Errorf("start hub worker: %w", err)
	}
	workers = append(workers, hw)
	if err := worker.EnsureSchedules(ctx, tc); err != nil {
		return err
	}
	var wg sync.WaitGroup
	hbCtx, stopHeartbeats := context.WithCancel(ctx)
	defer func() { stopHeartbeats(); wg.Wait() }()
	for _, name := range cfg.DevSites {
		sc := worker.SiteConfig{Site: name, Queue: vocab.DefaultQueue, Node: cfg.Node,
			Root: filepath.Join(cfg.DataDir, "sites", name), HeartbeatInterval: cfg.Heartbeat, Cipher: cfg.secrets,
			Metrics: o.steps}
		if sc.Node == "" {
			sc.Node, _ = os.Hostname()
		}
		sw, err := startSiteWorker(hbCtx, tc, sc, log, &wg)
		if err != nil {
			return err
		}
		workers = append(workers, sw)
	}

	servers, err := newServers(ctx, cfg, db, tc, log, o)
	if err != nil {
		return err
	}
	o.ready(db, tc)
	errc := serveAll(servers, lns, log)
	printBanner(cfg, ts.UIURL(), password, lns, o)
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	log.Info("shutting down")
	shutdownAll(servers)
	return err
}

// ensureDevSites creates the dev sites and, on a fresh database, a
// filesystem external target "dev-archive" (<data dir>/archive) that they
// all reach, so migrate, recall and send work out of the box.
func ensureDevSites(ctx context.Context, db *bun.DB, cfg *Config) error {
	var ids []int64
	for _, name := range cfg.DevSites {
		s, err := models.EnsureSite(ctx, db, name)
		if err != nil {
			return fmt.Errorf("create dev site %s: %w", name, err)
		}
		ids = append(ids, s.ID)
	}
	n, err := db.NewSelect().Model((*models.ExternalTarget)(nil)).Count(ctx)
	if err != nil || n > 0 || len(ids) == 0 {
		return err
	}
	t := &models.ExternalTarget{Name: "dev-archive", StorageType: "filesystem", LocalFileRegex: ".*", Enabled: true}
	t.MigrationTargetFolder = filepath.Join(cfg.DataDir, "archive")
	if t.MigrationTargetFolder, err = filepath.Abs(t.MigrationTargetFolder); err != nil {
		return err
	}
	if err := os.MkdirAll(t.MigrationTargetFolder, 0o750); err != nil {
		return err
	}
	return models.SaveExternalTarget(ctx, db, t, ids)
}

// runServe serves the three APIs against an existing Temporal cluster.
func runServe(ctx context.Context, cfg *Config) error {
	log := cfg.logger()
	cfg.HTTP.Log, cfg.Login.Log = log, log
	if err := cfg.openSecrets(false); err != nil {
		return err
	}
	lns, err := listenAll(cfg)
	if err != nil {
		return err
	}
	defer closeAll(lns)
	o, err := startOps(cfg, log)
	if err != nil {
		return err
	}
	defer o.stop()
	db, password, err := openHubDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	tc, err := dialTemporal(ctx, cfg, o.temporal, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	// Job workflows start here with search attributes: make sure they exist.
	if err := worker.EnsureSearchAttributes(ctx, tc, cfg.Namespace); err != nil {
		return err
	}
	servers, err := newServers(ctx, cfg, db, tc, log, o)
	if err != nil {
		return err
	}
	o.ready(db, tc)
	errc := serveAll(servers, lns, log)
	printBanner(cfg, "", password, lns, o)
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownAll(servers)
	return err
}

// runWorker runs the hub worker and/or one site worker until ctx ends.
func runWorker(ctx context.Context, cfg *Config) error {
	log := cfg.logger()
	if cfg.Site != "" {
		if err := checkRoot(cfg.Root, cfg.InitRoot); err != nil {
			return err
		}
		if legacyRoot(cfg.Root) {
			log.Warn("the site root is /, the default of earlier versions: the site's users reach the whole host; move the site's data to a folder of its own")
		}
	}
	if cfg.Hub {
		// A hub worker decrypts target credentials: no key, no start.
		if err := cfg.openSecrets(false); err != nil {
			return err
		}
	}
	o, err := startOps(cfg, log)
	if err != nil {
		return err
	}
	defer o.stop()
	if !cfg.Hub {
		o.probes.Starting("connecting to Temporal")
	}
	tc, err := dialTemporal(ctx, cfg, o.temporal, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	checks := []ops.Check{temporalCheck(tc)}
	if cfg.Hub {
		db, err := models.Open(cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := migrateUp(ctx, cfg, db, log); err != nil {
			return err
		}
		o.reg.MustRegister(ops.NewJobsCollector(db))
		checks = append(checks, dbCheck(db))
		hw := worker.Hub(tc, &hubact.Activities{DB: db, Secrets: cfg.secrets})
		if err := hw.Start(); err != nil {
			return fmt.Errorf("start hub worker: %w", err)
		}
		defer hw.Stop()
		if err := worker.EnsureSearchAttributes(ctx, tc, cfg.Namespace); err != nil {
			return err
		}
		if err := worker.EnsureSchedules(ctx, tc); err != nil {
			return err
		}
		log.Info("hub worker started", "task_queue", workflows.HubTaskQueue)
	}
	var wg sync.WaitGroup
	if cfg.Site != "" {
		sc := worker.SiteConfig{Site: cfg.Site, Queue: cfg.Queue, Root: cfg.Root, Node: cfg.Node, HeartbeatInterval: cfg.Heartbeat,
			Metrics: o.steps, StopTimeout: cfg.StopTimeout}
		// A site worker needs the key only for targets with credentials.
		if cfg.secrets != nil || cfg.openSecrets(false) == nil {
			sc.Cipher = cfg.secrets
		} else {
			log.Warn("site worker has no secret key: targets with credentials will fail (set HUB_SECRET_KEY)")
		}
		sw, err := startSiteWorker(ctx, tc, sc, log, &wg)
		if err != nil {
			return err
		}
		defer sw.Stop()
		log.Info("site worker started", "task_queue", workflows.SiteTaskQueue(cfg.Site, cfg.Queue), "root", cfg.Root)
	}
	o.probes.SetChecks(checks...)
	<-ctx.Done()
	wg.Wait()
	return nil
}

func startSiteWorker(ctx context.Context, tc client.Client, sc worker.SiteConfig, log *slog.Logger, wg *sync.WaitGroup) (sdkworker.Worker, error) {
	sw, err := worker.Site(tc, sc)
	if err != nil {
		return nil, fmt.Errorf("site worker %s/%s: %w", sc.Site, sc.Queue, err)
	}
	if err := sw.Start(); err != nil {
		return nil, fmt.Errorf("start site worker %s/%s: %w", sc.Site, sc.Queue, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		worker.Heartbeats(ctx, tc, sc, log)
	}()
	return sw, nil
}

// openHubDB opens and migrates the database, creates permissions, default
// groups and the administrator. password is non-empty only when it was
// generated now and must be shown once.
func openHubDB(ctx context.Context, cfg *Config, log *slog.Logger) (*bun.DB, string, error) {
	db, err := models.Open(cfg.DatabaseURL)
	if err != nil {
		return nil, "", err
	}
	fail := func(err error) (*bun.DB, string, error) { db.Close(); return nil, "", err }
	if err := migrateUp(ctx, cfg, db, log); err != nil {
		return fail(err)
	}
	if err := models.EnsureAuthData(ctx, db); err != nil {
		return fail(fmt.Errorf("create permissions and groups: %w", err))
	}
	if err := models.EnsureBuiltinWorkflows(ctx, db); err != nil {
		return fail(fmt.Errorf("create built-in workflows: %w", err))
	}
	password := cfg.AdminPassword
	if password == "" {
		password = generatePassword()
	}
	created, err := models.EnsureAdmin(ctx, db, cfg.AdminUsername, password, cfg.adminPasswordSet)
	if err != nil {
		return fail(fmt.Errorf("create administrator: %w", err))
	}
	if created && !cfg.adminPasswordSet {
		return db, password, nil
	}
	return db, "", nil
}

func generatePassword() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// The three listeners, in this order.
const (
	lnAPI = iota
	lnCJ
	lnAuth
)

// listenAll binds the three listeners, each with the connection caps of
// cfg.HTTP.
func listenAll(cfg *Config) ([]net.Listener, error) {
	var lns []net.Listener
	for _, a := range []struct{ addr, env string }{{cfg.APIAddr, "HUB_API_ADDR"}, {cfg.CJAddr, "HUB_CJ_ADDR"}, {cfg.AuthAddr, "HUB_AUTH_ADDR"}} {
		ln, err := net.Listen("tcp", a.addr)
		if err != nil {
			closeAll(lns)
			return nil, fmt.Errorf("cannot listen on %s (set %s): %w", a.addr, a.env, err)
		}
		lns = append(lns, cfg.HTTP.Listener(ln))
	}
	return lns, nil
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		_ = ln.Close()
	}
}

// newServers builds the three API servers; each logs its requests, counts
// them in o's metrics and answers the probes.
func newServers(ctx context.Context, cfg *Config, db *bun.DB, tc client.Client, log *slog.Logger, o *opsRuntime) ([]*http.Server, error) {
	tokens, err := auth.NewTokens(ctx, db)
	if err != nil {
		return nil, err
	}
	// One throttle for both servers that check passwords, so a guesser
	// cannot double its allowance by using both.
	tokens.Throttle = auth.NewThrottle(cfg.Login)
	ch := &changes.Service{DB: db, Temporal: tc, Log: log}
	api := &hubapi.Server{DB: db, Tokens: tokens, Changes: ch, Log: log, Secrets: cfg.secrets,
		IDP: &auth.IDP{Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID}}
	cjAPI := &cjapi.Server{DB: db, Tokens: tokens, Changes: ch, Site: cjSite(cfg), Log: log}
	oauth := &auth.OAuth2Server{DB: db, Tokens: tokens, Log: log}
	mk := func(name string, h http.Handler) *http.Server {
		return cfg.HTTP.Server(ops.WithProbes(o.probes, web.AccessLog(log, name, o.http, h)))
	}
	return []*http.Server{lnAPI: mk("api", api.Handler()), lnCJ: mk("cj", cjAPI.Handler()), lnAuth: mk("auth", oauth.Handler())}, nil
}

// cjSite is the site the C+J API manages: HUB_CJ_SITE, else the first dev
// site; empty lets the API use the oldest site record.
func cjSite(cfg *Config) string {
	if cfg.CJSite == "" && len(cfg.DevSites) > 0 {
		return cfg.DevSites[0]
	}
	return cfg.CJSite
}

func serveAll(servers []*http.Server, lns []net.Listener, log *slog.Logger) <-chan error {
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() {
			if err := srv.Serve(lns[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("server stopped", "addr", lns[i].Addr().String(), "error", err)
				errc <- err
			}
		}()
	}
	return errc
}

func shutdownAll(servers []*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
}

func printBanner(cfg *Config, uiURL, password string, lns []net.Listener, o *opsRuntime) {
	url := func(i int) string { return "http://" + lns[i].Addr().String() }
	fmt.Println("The hub is running.")
	fmt.Printf("  Hub API            %s/api/   (reference: %s/api/docs/)\n", url(lnAPI), url(lnAPI))
	fmt.Printf("  C+J API            %s/\n", url(lnCJ))
	fmt.Printf("  C+J token server   %s/oauth2/token\n", url(lnAuth))
	fmt.Printf("  Temporal frontend  %s (namespace %s)\n", cfg.TemporalAddr, cfg.Namespace)
	if uiURL != "" {
		fmt.Printf("  Temporal Web UI    %s/namespaces/%s/workflows\n", uiURL, cfg.Namespace)
	}
	if len(cfg.DevSites) > 0 {
		fmt.Printf("  Dev sites          %v, roots under %s\n", cfg.DevSites, filepath.Join(cfg.DataDir, "sites"))
	}
	fmt.Printf("  Database           %s\n", cfg.DatabaseURL)
	if o.addr != nil {
		fmt.Printf("  Probes, metrics    http://%s/healthz /readyz /metrics\n", o.addr)
	}
	switch {
	case password != "":
		fmt.Printf("  Admin              %s / %s   (generated now and shown only once)\n", cfg.AdminUsername, password)
	case cfg.adminPasswordSet:
		fmt.Printf("  Admin              %s / (the password in HUB_ADMIN_PASSWORD)\n", cfg.AdminUsername)
	default:
		fmt.Printf("  Admin              %s / (shown at first start; set HUB_ADMIN_PASSWORD to reset it)\n", cfg.AdminUsername)
	}
	fmt.Println("Press Ctrl-C to stop.")
}
