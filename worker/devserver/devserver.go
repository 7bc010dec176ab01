// Package devserver runs a Temporal server and its Web UI inside the hub
// process, in the spirit of `temporal server start-dev`: SQLite persistence
// (a file, or memory for tests), one history shard, every service on 127.0.0.1.
package devserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/thehub/hub/cmd/hub/hardening"
)

const (
	localhost   = "127.0.0.1"
	clusterName = "active"
	// clusterID is fixed so that a database file always belongs to "this" cluster.
	clusterID = "5f0a4fd6-8c55-4cbb-9b4e-7c3b3f1e2a61"
)

// Options configures an embedded Temporal server.
type Options struct {
	// FrontendAddr is the host:port of the gRPC frontend, e.g. "127.0.0.1:7233".
	// Port 0 picks a free port; "" means "127.0.0.1:0". The host must be an IP;
	// an empty host or "localhost" means 127.0.0.1, not every interface.
	FrontendAddr string
	// UIAddr is the host:port of the Web UI; "" runs no UI. Port 0 picks a
	// free port; the host follows the FrontendAddr rules.
	UIAddr string
	// DatabaseFile is the SQLite file; "" keeps everything in memory, which is
	// lost on Stop (meant for tests).
	DatabaseFile string
	// Namespace is registered at start, idempotently (default "default").
	Namespace string
	// SearchAttributes are custom search attributes registered on Namespace.
	// Ones missing from an existing database file are added at start.
	SearchAttributes map[string]enums.IndexedValueType
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// LogLevel is the minimum level passed to Logger (default slog.LevelWarn,
	// because the server is very chatty at Info).
	LogLevel slog.Leveler
	// UILimits are the Web UI server's timeouts and connection caps
	// (default hardening.Defaults()).
	UILimits *hardening.Limits
}

// Server is a running embedded server.
type Server struct {
	temporal     temporal.Server
	ui           *http.Server // nil without UI
	frontendAddr string
	uiURL        string
	namespace    string
	logger       *slog.Logger
	serverLog    slogLogger
	stopOnce     sync.Once
}

// Start starts the server (and the UI when opts.UIAddr is set) and returns
// once the frontend accepts requests.
func Start(opts Options) (s *Server, err error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LogLevel == nil {
		opts.LogLevel = slog.LevelWarn
	}
	if opts.FrontendAddr == "" {
		opts.FrontendAddr = net.JoinHostPort(localhost, "0")
	}

	// Both ports are checked before anything starts, so a second hub on the
	// same machine fails with a readable message rather than deep in the server.
	var uiLn net.Listener
	if opts.UIAddr != "" {
		uiLn, err = listen(opts.UIAddr, "temporal UI", "HUB_TEMPORAL_UI_ADDR")
		if err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = uiLn.Close()
			}
		}()
	}
	// The frontend is bound by the server itself, so the check releases the
	// port again; all it keeps is the port number. Port 0 is picked as the
	// other services' ports are (FreePort).
	if host, port, err := net.SplitHostPort(opts.FrontendAddr); err == nil && port == "0" {
		ip := host
		if ip == "" || ip == "localhost" {
			ip = localhost
		}
		if p, err := FreePort(ip); err == nil {
			opts.FrontendAddr = net.JoinHostPort(host, strconv.Itoa(p))
		}
	}
	feLn, err := listen(opts.FrontendAddr, "temporal frontend", "HUB_TEMPORAL_ADDR")
	if err != nil {
		return nil, err
	}
	feBind, fePort := splitListener(feLn)
	_ = feLn.Close()

	sqlConf, err := prepareDatabase(opts)
	if err != nil {
		return nil, err
	}

	s = &Server{
		frontendAddr: net.JoinHostPort(dialHost(feBind), strconv.Itoa(fePort)),
		namespace:    opts.Namespace,
		logger:       opts.Logger,
		serverLog:    newSlogLogger(opts.Logger, opts.LogLevel),
	}
	s.temporal, err = newTemporal(s.serverLog, sqlConf, feBind, fePort, s.frontendAddr)
	if err != nil {
		return nil, err
	}
	if err := s.temporal.Start(); err != nil {
		s.serverLog.stopping.Store(true)
		_ = s.temporal.Stop()
		return nil, fmt.Errorf("starting temporal server: %w", err)
	}
	if err := s.ensureSearchAttributes(opts.SearchAttributes); err != nil {
		s.Stop()
		return nil, err
	}

	if uiLn != nil {
		limits := hardening.Defaults()
		if opts.UILimits != nil {
			limits = *opts.UILimits
		}
		if err := s.startUI(limits.Listener(uiLn), limits); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// FrontendAddr returns the host:port clients dial to reach the frontend.
func (s *Server) FrontendAddr() string { return s.frontendAddr }

// UIURL returns the Web UI's base URL, "http://host:port", or "" without UI.
func (s *Server) UIURL() string { return s.uiURL }

// Namespace returns the namespace registered at start.
func (s *Server) Namespace() string { return s.namespace }

// Stop stops the UI, then the server. It is safe to call more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.serverLog.stopping.Store(true)
		if s.ui != nil {
			// Close rather than Shutdown: the UI holds long polls open and
			// nothing it serves is worth waiting for.
			_ = s.ui.Close()
		}
		if err := s.temporal.Stop(); err != nil {
			s.logger.Warn("stopping temporal server", "error", err)
		}
	})
}

// listen binds addr to prove it is free. what and envVar only shape the error.
func listen(addr, what, envVar string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s address %q: %w (set %s)", what, addr, err, envVar)
	}
	if host != "" && host != "localhost" && net.ParseIP(host) == nil {
		// The server binds with net.ParseIP; a hostname would make it Fatal.
		return nil, fmt.Errorf("%s address %s must use an IP address (set %s)", what, addr, envVar)
	}
	if host == "" || host == "localhost" {
		addr = net.JoinHostPort(localhost, portOf(addr))
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s address %s is already in use (set %s)", what, addr, envVar)
	} else if err != nil {
		return nil, fmt.Errorf("cannot listen on %s address %s: %w (set %s)", what, addr, err, envVar)
	}
	return ln, nil
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

func splitListener(ln net.Listener) (ip string, port int) {
	a := ln.Addr().(*net.TCPAddr)
	return a.IP.String(), a.Port
}

// dialHost turns a bind address into one a client can dial.
func dialHost(ip string) string {
	if parsed := net.ParseIP(ip); parsed == nil || parsed.IsUnspecified() {
		return localhost
	}
	return ip
}

// FreePort finds an unused port on ip for a listener bound a moment later
// (the embedded server's, a test's hub). It is picked at random below the
// kernel's ephemeral range (ip_local_port_range), from which every
// outgoing connection on the machine takes its port: a port asked of the
// kernel (":0") and released was seen taken by another process in that
// moment (CI: "bind: address already in use", the server's start failed).
// Below the range only another listener picking the same port at random
// can take it; within this process no port is handed out twice (the tests
// start many servers at once, each binding its ports seconds after
// picking them: CI saw one take a port another had just picked).
func FreePort(ip string) (int, error) {
	if low := ephemeralLow(); low > minPort {
		for range 100 {
			port := minPort + mrand.IntN(low-minPort)
			if _, given := handedOut.Load(port); given {
				continue
			}
			if ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
				_ = ln.Close()
				if _, given := handedOut.LoadOrStore(port, true); !given {
					return port, nil
				}
			}
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// handedOut holds the ports FreePort gave in this process.
var handedOut sync.Map

// minPort is the lowest port FreePort picks: below it are the well-known
// and commonly configured ones.
const minPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range, 32768
// (Linux's default) where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 32768
	}
	return low
}

// prepareDatabase returns the SQLite config, creating the schema for a new
// file and registering the namespace before the server first reads it.
func prepareDatabase(opts Options) (*config.SQL, error) {
	conf := &config.SQL{
		PluginName: sqliteplugin.PluginName,
		// One connection: SQLite has a single writer, and more connections
		// only turned into SQLITE_BUSY storms in our measurements.
		MaxConns:     1,
		MaxIdleConns: 1,
	}
	if opts.DatabaseFile == "" {
		// A fresh random name per Start keeps servers in one process (tests)
		// apart; the plugin creates the schema for memory databases itself.
		// The plugin never closes its connections, so each one lives until
		// the process exits.
		conf.DatabaseName = "hub-" + rand.Text()
		conf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	} else {
		conf.DatabaseName = opts.DatabaseFile
		conf.ConnectAttributes = map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "normal",
		}
		if _, err := os.Stat(filepath.Dir(opts.DatabaseFile)); err != nil {
			return nil, fmt.Errorf("temporal database directory: %w", err)
		}
		// An empty file counts as new too: that is what an interrupted first
		// run or a `touch` leaves behind.
		if fi, err := os.Stat(opts.DatabaseFile); errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0) {
			if err := sqliteschema.SetupSchema(conf); err != nil {
				return nil, fmt.Errorf("creating temporal schema in %s: %w", opts.DatabaseFile, err)
			}
		} else if err != nil {
			return nil, fmt.Errorf("temporal database file: %w", err)
		}
	}

	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", opts.Namespace, err)
	}
	// A no-op when the namespace exists already (restart on the same file).
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return nil, fmt.Errorf("registering namespace %s: %w", opts.Namespace, err)
	}
	return conf, nil
}

// newTemporal builds (but does not start) the server.
func newTemporal(logger slogLogger, sqlConf *config.SQL, feBind string, fePort int, feDial string) (srv temporal.Server, err error) {
	// The frontend's HTTP API serves Nexus and the HTTP flavour of the API;
	// without it the server warns at every start.
	httpPort, err := FreePort(feBind)
	if err != nil {
		return nil, fmt.Errorf("finding a port for the temporal HTTP API: %w", err)
	}

	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = localhost
	conf.Persistence = config.Persistence{
		DefaultStore:     "sqlite",
		VisibilityStore:  "sqlite",
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{"sqlite": {SQL: sqlConf}},
	}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             feDial,
				HTTPAddress:            net.JoinHostPort(dialHost(feBind), strconv.Itoa(httpPort)),
				ClusterID:              clusterID,
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// The server's own system workers dial this; it must be set.
	conf.PublicClient.HostPort = feDial

	conf.Services = map[string]config.Service{
		string(primitives.FrontendService): {RPC: config.RPC{GRPCPort: fePort, HTTPPort: httpPort, BindOnIP: feBind}},
	}
	hosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(feDial),
	}
	for _, svc := range []primitives.ServiceName{primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		port, err := FreePort(localhost)
		if err != nil {
			return nil, fmt.Errorf("finding a port for temporal %s: %w", svc, err)
		}
		conf.Services[string(svc)] = config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: localhost}}
		hosts[svc] = static.SingleLocalHost(net.JoinHostPort(localhost, strconv.Itoa(port)))
	}

	dynConf := dynamicconfig.StaticClient{
		// SQLite is local and fast; the default persistence rate limits are
		// sized for shared databases and only slow a dev server down.
		dynamicconfig.FrontendPersistenceMaxQPS.Key(): 10000,
		dynamicconfig.HistoryPersistenceMaxQPS.Key():  45000,
		// Search attributes added at runtime must be usable immediately.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// The UI lists and counts workflows constantly.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		// The history queues are read at most 20 times a second per shard
		// by default: with the one shard here, every hop of a job (an
		// activity done, the next workflow task handed out) waited up to
		// 50 ms for the next read, ~45 ms a hop measured, ~600 ms for a
		// one-file job. Sized for clusters of many shards, not one.
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   1000,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():      1000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): 1000,
	}

	// Building the server binds the gRPC listeners; a failure there reaches
	// logger.Fatal, which panics while this flag is set (see slogLogger.Fatal).
	logger.fatalPanics.Store(true)
	defer logger.fatalPanics.Store(false)
	defer func() {
		if r := recover(); r != nil {
			if fe, ok := r.(fatalError); ok {
				err = fmt.Errorf("building temporal server: %w", fe)
				return
			}
			panic(r)
		}
	}()
	srv, err = temporal.NewServer(
		temporal.WithConfig(&conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dynConf),
	)
	if err != nil {
		return nil, fmt.Errorf("building temporal server: %w", err)
	}
	return srv, nil
}

// ensureSearchAttributes adds the custom search attributes that the namespace
// lacks. CreateNamespaces only sets them when it creates the namespace, so
// without this a search attribute added to the hub later would never reach an
// existing database file.
func (s *Server) ensureSearchAttributes(want map[string]enums.IndexedValueType) error {
	if len(want) == 0 {
		return nil
	}
	conn, err := grpc.NewClient(s.frontendAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dialing temporal frontend: %w", err)
	}
	defer conn.Close()
	op := operatorservice.NewOperatorServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.namespace})
	if err != nil {
		return fmt.Errorf("listing search attributes: %w", err)
	}
	missing := map[string]enums.IndexedValueType{}
	for name, typ := range want {
		got, ok := have.GetCustomAttributes()[name]
		if !ok {
			missing[name] = typ
		} else if got != typ {
			return fmt.Errorf("search attribute %s is registered as %s, not %s; it cannot be changed in place",
				name, got, typ)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        s.namespace,
		SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("adding search attributes: %w", err)
	}
	return nil
}

// startUI serves the Web UI on ln, which Start bound already, with limits.
func (s *Server) startUI(ln net.Listener, limits hardening.Limits) error {
	host, port := splitListener(ln)
	ui := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: s.frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    s.namespace,
		// Plain http on localhost: a secure-only CSRF cookie would never come back.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
	}))
	// uiserver.Server.Start binds the port itself and calls echo's
	// Logger.Fatal, i.e. os.Exit, if that fails or if serving ever errors. We
	// serve its handler on our own listener instead, so a busy port is an
	// error from Start and nothing in the UI can end the hub process.
	h, err := uiHandler(ui)
	if err != nil {
		return err
	}
	s.ui = limits.Server(h)
	s.uiURL = "http://" + net.JoinHostPort(dialHost(host), strconv.Itoa(port))
	go func() {
		if err := s.ui.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("temporal UI stopped serving", "error", err)
		}
	}()
	return nil
}

// uiHandler returns the echo router inside ui. The ui-server exports no
// handler, so we read its unexported httpServer field. The version is pinned
// in go.mod and TestUI fails loudly if an upgrade renames the field.
func uiHandler(ui *uiserver.Server) (http.Handler, error) {
	f := reflect.ValueOf(ui).Elem().FieldByName("httpServer")
	if !f.IsValid() {
		return nil, errors.New("temporal UI: ui-server has no httpServer field (ui-server upgraded?)")
	}
	h, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(http.Handler)
	if !ok || h == nil || reflect.ValueOf(h).IsNil() {
		return nil, fmt.Errorf("temporal UI: ui-server httpServer is a %s, not an http.Handler", f.Type())
	}
	return h, nil
}
