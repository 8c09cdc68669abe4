// Command queen runs the broker as a standalone server that speaks Queen's
// REST API, so Queen's official clients can use it unchanged.
//
// It stores everything with Badger in a data directory (./queen-data by
// default) and listens on 127.0.0.1:6632, this machine only. Settings
// come from flags or from the environment variables Queen's server reads;
// a flag wins over its variable:
//
//	-host               HOST                       listen address (default 127.0.0.1; 0.0.0.0 for every interface,
//	                                               which needs a token, see below)
//	-port               PORT                       listen port (default 6632; 0 picks a free one)
//	-data               QUEEN_DATA_DIR             data directory (default ./queen-data)
//	-durability         QUEEN_DURABILITY           sync (fsync every commit, default), pushes (fsync pushes, acks
//	                                               within -ack-sync-delay) or none
//	-ack-sync-delay     QUEEN_ACK_SYNC_DELAY       with -durability pushes: ms within which acks are fsynced
//	                                               (default 100, 1 to 10000)
//	-subscription-mode  DEFAULT_SUBSCRIPTION_MODE  where new consumer groups start: new (default) or all
//	-default-timeout    DEFAULT_TIMEOUT            long-poll timeout in ms of pops that send none (default 30000)
//	-default-batch      DEFAULT_BATCH_SIZE         batch of pops that send none (default 1)
//	-max-body           QUEEN_MAX_BODY_BYTES       request body limit in bytes (default 16 MiB)
//	-memory-budget      QUEEN_MEMORY_BUDGET        storage memory in bytes, or with KiB, MiB or GiB (default 64MiB; see queen.Options.MemoryBudget)
//	-log-level          LOG_LEVEL                  debug, info (default), warn or error
//	-shutdown-timeout   QUEEN_SHUTDOWN_TIMEOUT     how long shutdown waits for requests (default 30s)
//	-retention-interval RETENTION_INTERVAL         ms between retention runs (default 10000)
//	-eviction-interval  EVICTION_INTERVAL          ms between max-wait eviction runs (default 10000)
//	                    QUEEN_ENCRYPTION_KEY       64 hex characters: the AES-256 key for encrypted queues
//	-token              QUEEN_TOKEN                bearer token every route but /health requires
//	-public-metrics     QUEEN_PUBLIC_METRICS       serve /metrics and /metrics/prometheus without a token, as Queen
//	                                               does (default false)
//	-console            QUEEN_CONSOLE              serve the operator console at /console/, behind the same token or
//	                                               JWT checks as the API (default true)
//	-allow-unauthenticated QUEEN_ALLOW_UNAUTHENTICATED  listen beyond loopback with no token or JWT secret, open to
//	                                               anyone who can reach it (default false: refused at start)
//	-cors-origins       QUEEN_CORS_ORIGINS         comma-separated origins whose web pages may call the API
//	                                               (https://dash.example.com), or * for every one (default none)
//	                    JWT_SECRET                 accept HS256 JWTs signed with it (see below)
//	                    JWT_ISSUER, JWT_AUDIENCE   when set, the iss and aud a JWT must carry
//	                    JWT_CLOCK_SKEW             leeway in seconds on exp and nbf (default 30)
//	-version                                       print "queen <version>" and exit
//
// # Access control
//
// With QUEEN_TOKEN, every request but GET /health (/metrics included,
// unless -public-metrics) and CORS preflights must carry
// "Authorization: Bearer <token>" (compared in constant time) or is
// answered 401. With JWT_SECRET, a request may instead carry an HS256 JWT
// signed with it, whose claim role (a string) or roles (an array) names
// one of Queen's roles: read-only, read-write or admin, each allowing the
// routes of Queen's levels up to its own (a read-only token that pushes
// gets 403). exp and nbf are checked against the system clock; any
// algorithm but HS256, "none" included, is refused. JWT_ENABLED=true
// without JWT_SECRET, or a JWT_ALGORITHM other than HS256, is refused at
// start: other key types are not supported. With neither variable set
// every route is open to whoever can connect, so the server refuses to
// start (exit 2) on an address other than loopback unless
// -allow-unauthenticated says so, and then warns.
//
// # Web pages
//
// Requests a browser sends from a page of another origin are refused
// (403 {"error":"origin not allowed"}) and get no CORS headers, unless
// -cors-origins lists that origin: then they get CORS headers naming it.
// Queen's clients send no Origin and the console is same-origin, so
// neither is affected. See httpapi.Options.AllowedOrigins.
//
// Retention, completed retention and max-wait eviction run together in one
// maintenance round, so the broker has one period for them: the retention
// or eviction interval when only one is set, the smaller when both are.
//
// On SIGTERM or SIGINT it stops accepting connections, ends every parked
// long-poll at once (they answer 204), lets running requests finish, and
// closes Badger cleanly. A second signal exits at once.
//
// # Subcommands
//
// Run with a subcommand as its first argument, it serves nothing:
//
//	queen ctl COMMAND ...          operate a running server (queues, groups, lag, dlq, parked,
//	                               seek, push, tail, maintenance), over package remote
//	queen backup -o FILE ...       back up a running server (--server) or a stopped -dir
//	queen restore -dir DIR FILE... rebuild a store from a backup and its increments
//	queen inspect -dir DIR         report on a stopped store, read-only
//
// Each takes --help. They exit 0 on success, 1 when something is not
// found or refused, 2 on bad usage. See docs/cli.md.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/httpapi/history"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	go func() {
		<-ctx.Done()
		stop() // a second signal gets the default behaviour: exit now
	}()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// config is the server's settings.
type config struct {
	// version asks for the version to be printed instead of serving.
	version bool

	host            string
	port            int
	dataDir         string
	durability      queen.Durability
	ackSyncDelay    time.Duration // 0: the broker's default
	subscription    queen.SubscriptionMode
	encryptionKey   []byte
	defaultTimeout  time.Duration
	defaultBatch    int
	maxBody         int64
	logLevel        slog.Level
	shutdownTimeout time.Duration
	// maintenance is the period of retention and eviction; 0 leaves the
	// broker's default.
	maintenance time.Duration
	// memoryBudget is queen.Options.MemoryBudget; 0 leaves the broker's
	// default.
	memoryBudget int64

	// token is the shared bearer token every route but /health needs;
	// empty for none.
	token string
	// publicMetrics serves /metrics and /metrics/prometheus without a
	// token (httpapi.Options.PublicMetrics).
	publicMetrics bool
	// console serves the operator console at /console/.
	console bool
	// jwtSecret is the HS256 key of the JWTs accepted; nil for none.
	jwtSecret []byte
	// jwtIssuer and jwtAudience, when set, must match iss and aud.
	jwtIssuer, jwtAudience string
	// jwtSkew is the leeway on exp and nbf.
	jwtSkew time.Duration
	// allowUnauthenticated lets the server listen beyond loopback with
	// no token and no JWT secret.
	allowUnauthenticated bool
	// corsOrigins are the origins whose pages may call the API
	// (httpapi.Options.AllowedOrigins), canonical; nil for none.
	corsOrigins []string
}

// parseConfig reads flags over environment variables over defaults.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (*config, error) {
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("queen", flag.ContinueOnError)
	fs.SetOutput(out)
	host := fs.String("host", env("HOST", "127.0.0.1"), "listen address; 0.0.0.0 for every interface, which needs -token or JWT_SECRET, or -allow-unauthenticated (env HOST)")
	port := fs.String("port", env("PORT", "6632"), "listen port, 0 for any free one (env PORT)")
	dataDir := fs.String("data", env("QUEEN_DATA_DIR", "./queen-data"), "data directory (env QUEEN_DATA_DIR)")
	durability := fs.String("durability", env("QUEEN_DURABILITY", "sync"), "sync: fsync every commit; pushes: fsync pushes, acks within -ack-sync-delay; none: survive process crashes only (env QUEEN_DURABILITY)")
	ackSyncDelay := fs.String("ack-sync-delay", env("QUEEN_ACK_SYNC_DELAY", ""), "with -durability pushes: ms within which acks are fsynced, 1 to 10000 (default 100) (env QUEEN_ACK_SYNC_DELAY)")
	subMode := fs.String("subscription-mode", env("DEFAULT_SUBSCRIPTION_MODE", "new"), "where new consumer groups start: new or all (env DEFAULT_SUBSCRIPTION_MODE)")
	timeout := fs.String("default-timeout", env("DEFAULT_TIMEOUT", "30000"), "long-poll timeout in ms of pops that send none, at most 60000 (env DEFAULT_TIMEOUT)")
	batch := fs.String("default-batch", env("DEFAULT_BATCH_SIZE", "1"), "batch size of pops that send none (env DEFAULT_BATCH_SIZE)")
	maxBody := fs.String("max-body", env("QUEEN_MAX_BODY_BYTES", strconv.Itoa(16<<20)), "request body limit in bytes (env QUEEN_MAX_BODY_BYTES)")
	memBudget := fs.String("memory-budget", env("QUEEN_MEMORY_BUDGET", ""), "memory for storage buffers: bytes, or a number with KiB, MiB or GiB; at least 8MiB (default 64MiB) (env QUEEN_MEMORY_BUDGET)")
	logLevel := fs.String("log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	shutdown := fs.String("shutdown-timeout", env("QUEEN_SHUTDOWN_TIMEOUT", "30s"), "how long shutdown waits for running requests (env QUEEN_SHUTDOWN_TIMEOUT)")
	retention := fs.String("retention-interval", env("RETENTION_INTERVAL", ""), "ms between retention runs; with -eviction-interval the smaller wins (default 10000) (env RETENTION_INTERVAL)")
	eviction := fs.String("eviction-interval", env("EVICTION_INTERVAL", ""), "ms between max-wait eviction runs; with -retention-interval the smaller wins (default 10000) (env EVICTION_INTERVAL)")
	token := fs.String("token", env("QUEEN_TOKEN", ""), "bearer token every route but /health requires (env QUEEN_TOKEN)")
	publicMetrics := fs.Bool("public-metrics", false, "serve /metrics and /metrics/prometheus without a token, as Queen does (env QUEEN_PUBLIC_METRICS)")
	consoleOn := fs.Bool("console", true, "serve the operator console at /console/ (env QUEEN_CONSOLE)")
	allowOpen := fs.Bool("allow-unauthenticated", false, "listen beyond loopback with no -token or JWT_SECRET: anyone who can reach the server can read, change and delete every queue (env QUEEN_ALLOW_UNAUTHENTICATED)")
	corsOrigins := fs.String("cors-origins", env("QUEEN_CORS_ORIGINS", ""), "comma-separated origins whose web pages may call the API, such as https://dash.example.com, or * for every one; default none (env QUEEN_CORS_ORIGINS)")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintln(out, "Usage: queen [flags]\n       queen ctl|backup|restore|inspect ... (--help on each)\n\nRuns the queen broker with Queen's REST API. Flags win over environment variables.\n"+
			"QUEEN_ENCRYPTION_KEY (64 hex characters) sets the key for encrypted queues.\n"+
			"JWT_SECRET turns on Queen's HS256 JWTs (role or roles claim: read-only, read-write, admin);\n"+
			"JWT_ISSUER, JWT_AUDIENCE and JWT_CLOCK_SKEW (seconds, default 30) refine the checks.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *version {
		return &config{version: true}, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c := &config{host: *host, dataDir: *dataDir, token: *token, publicMetrics: *publicMetrics, console: *consoleOn,
		allowUnauthenticated: *allowOpen}
	var err error
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["public-metrics"] {
		switch v := strings.ToLower(env("QUEEN_PUBLIC_METRICS", "false")); v {
		case "true", "1":
			c.publicMetrics = true
		case "false", "0":
		default:
			return nil, fmt.Errorf("QUEEN_PUBLIC_METRICS must be true or false, not %q", v)
		}
	}
	if !set["console"] {
		switch v := strings.ToLower(env("QUEEN_CONSOLE", "true")); v {
		case "true", "1":
		case "false", "0":
			c.console = false
		default:
			return nil, fmt.Errorf("QUEEN_CONSOLE must be true or false, not %q", v)
		}
	}
	if !set["allow-unauthenticated"] {
		switch v := strings.ToLower(env("QUEEN_ALLOW_UNAUTHENTICATED", "false")); v {
		case "true", "1":
			c.allowUnauthenticated = true
		case "false", "0":
		default:
			return nil, fmt.Errorf("QUEEN_ALLOW_UNAUTHENTICATED must be true or false, not %q", v)
		}
	}
	if c.corsOrigins, err = parseOrigins(*corsOrigins); err != nil {
		return nil, err
	}
	if c.port, err = strconv.Atoi(*port); err != nil || c.port < 0 || c.port > 65535 {
		return nil, fmt.Errorf("port must be a number from 0 to 65535, not %q", *port)
	}
	if c.dataDir == "" {
		return nil, errors.New("the data directory must not be empty")
	}
	switch strings.ToLower(*durability) {
	case "sync", "fsync", "sync-every-commit":
		c.durability = queen.SyncEveryCommit
	case "none", "async", "sync-never":
		c.durability = queen.SyncNever
	case "pushes", "sync-pushes":
		c.durability = queen.SyncPushes
	default:
		return nil, fmt.Errorf("durability must be sync, pushes or none, not %q", *durability)
	}
	if *ackSyncDelay != "" {
		ms, err := strconv.ParseInt(*ackSyncDelay, 10, 64)
		if lo, hi := queen.MinAckSyncDelay.Milliseconds(), queen.MaxAckSyncDelay.Milliseconds(); err != nil || ms < lo || ms > hi {
			return nil, fmt.Errorf("ack sync delay must be %d to %d milliseconds, not %q", lo, hi, *ackSyncDelay)
		}
		c.ackSyncDelay = time.Duration(ms) * time.Millisecond
	}
	switch m := strings.ToLower(*subMode); m {
	case "new", "new-only", "all":
		c.subscription = queen.SubscriptionMode(m)
	case "":
		c.subscription = queen.SubscriptionModeNew
	default:
		return nil, fmt.Errorf("subscription mode must be new or all, not %q", *subMode)
	}
	ms, err := strconv.Atoi(*timeout)
	if err != nil || ms <= 0 {
		return nil, fmt.Errorf("default timeout must be a positive number of milliseconds, not %q", *timeout)
	}
	c.defaultTimeout = time.Duration(min(ms, 60000)) * time.Millisecond
	if c.defaultBatch, err = strconv.Atoi(*batch); err != nil || c.defaultBatch <= 0 {
		return nil, fmt.Errorf("default batch must be a positive number, not %q", *batch)
	}
	if c.maxBody, err = strconv.ParseInt(*maxBody, 10, 64); err != nil || c.maxBody <= 0 {
		return nil, fmt.Errorf("max body must be a positive number of bytes, not %q", *maxBody)
	}
	if *memBudget != "" {
		if c.memoryBudget, err = parseBytes(*memBudget); err != nil {
			return nil, fmt.Errorf("memory budget must be bytes or a number with KiB, MiB or GiB, such as 64MiB, not %q", *memBudget)
		}
	}
	if err := c.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, fmt.Errorf("log level must be debug, info, warn or error, not %q", *logLevel)
	}
	if c.shutdownTimeout, err = time.ParseDuration(*shutdown); err != nil || c.shutdownTimeout <= 0 {
		return nil, fmt.Errorf("shutdown timeout must be a positive duration such as 30s, not %q", *shutdown)
	}
	for _, iv := range []struct{ name, v string }{{"retention interval", *retention}, {"eviction interval", *eviction}} {
		if iv.v == "" {
			continue
		}
		ms, err := strconv.ParseInt(iv.v, 10, 64)
		if err != nil || ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return nil, fmt.Errorf("%s must be a positive number of milliseconds, not %q", iv.name, iv.v)
		}
		if d := time.Duration(ms) * time.Millisecond; c.maintenance == 0 || d < c.maintenance {
			c.maintenance = d
		}
	}
	if err := c.parseJWT(env); err != nil {
		return nil, err
	}
	if c.encryptionKey, err = encryptionKey(getenv); err != nil {
		return nil, err
	}
	return c, nil
}

// encryptionKey reads QUEEN_ENCRYPTION_KEY: nil when unset.
func encryptionKey(getenv func(string) string) ([]byte, error) {
	k := strings.TrimSpace(getenv("QUEEN_ENCRYPTION_KEY"))
	if k == "" {
		return nil, nil
	}
	key, err := hex.DecodeString(k)
	if err != nil || len(key) != 32 {
		return nil, errors.New("QUEEN_ENCRYPTION_KEY must be 64 hexadecimal characters (32 bytes)")
	}
	return key, nil
}

// parseJWT reads Queen's JWT settings. Only HS256 with JWT_SECRET is
// served; settings asking for anything else are refused rather than
// ignored, so that a server meant to check tokens never runs open.
func (c *config) parseJWT(env func(name, def string) string) error {
	if s := env("JWT_SECRET", ""); s != "" {
		c.jwtSecret = []byte(s)
	}
	if enabled := strings.ToLower(env("JWT_ENABLED", "")); (enabled == "true" || enabled == "1") && c.jwtSecret == nil {
		return errNoSecret
	}
	switch alg := env("JWT_ALGORITHM", ""); alg {
	case "", "HS256", "auto":
	default:
		return fmt.Errorf("JWT_ALGORITHM %q is not supported: this server verifies HS256 tokens only", alg)
	}
	c.jwtIssuer, c.jwtAudience = env("JWT_ISSUER", ""), env("JWT_AUDIENCE", "")
	skew := env("JWT_CLOCK_SKEW", "30")
	secs, err := strconv.Atoi(skew)
	if err != nil || secs < 0 || secs > 86400 {
		return fmt.Errorf("JWT_CLOCK_SKEW must be a number of seconds from 0 to 86400, not %q", skew)
	}
	c.jwtSkew = time.Duration(secs) * time.Second
	return nil
}

// parseOrigins reads a comma-separated list of web origins, each
// http:// or https:// and a host with an optional port, and returns them
// as browsers send them in Origin (lower case, no default port, no
// trailing slash); "*" stands alone for every origin. An empty list is
// nil.
func parseOrigins(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var origins []string
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimSpace(o)
		if o == "*" {
			origins = append(origins, o)
			continue
		}
		bad := fmt.Errorf("CORS origin %q must be http:// or https:// and a host with an optional port, without a path, such as https://dash.example.com (or * alone for every origin)", o)
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.Opaque != "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			return nil, bad
		}
		host, port := strings.ToLower(u.Hostname()), u.Port()
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		if port != "" {
			n, err := strconv.Atoi(port)
			if err != nil || n < 1 || n > 65535 {
				return nil, bad
			}
			if !(u.Scheme == "http" && n == 80) && !(u.Scheme == "https" && n == 443) {
				host += ":" + strconv.Itoa(n)
			}
		}
		origins = append(origins, u.Scheme+"://"+host)
	}
	if len(origins) > 1 && slices.Contains(origins, "*") {
		return nil, errors.New("CORS origin * allows every origin: give it alone, not in a list")
	}
	return origins, nil
}

// brokerOptions are the broker's options for c.
func (c *config) brokerOptions(logger *slog.Logger) *queen.Options {
	return &queen.Options{
		Durability: c.durability, AckSyncDelay: c.ackSyncDelay, DefaultSubscriptionMode: c.subscription, EncryptionKey: c.encryptionKey, Logger: logger,
		MaintenanceInterval: c.maintenance, MemoryBudget: c.memoryBudget,
	}
}

// handler is the API of c on b, checked by auth (nil for none), charting
// from hist (nil for none); closing stopPolls ends the waiting long-polls.
func (c *config) handler(b *queen.Broker, auth *authorizer, hist *history.Recorder, logger *slog.Logger, stopPolls <-chan struct{}) http.Handler {
	hopts := &httpapi.Options{
		Logger: logger, Shutdown: stopPolls, MaxBodyBytes: c.maxBody,
		DefaultTimeout: c.defaultTimeout, DefaultBatch: c.defaultBatch, PublicMetrics: c.publicMetrics,
		History: hist, RestrictOrigins: true, AllowedOrigins: c.corsOrigins,
	}
	if auth != nil {
		hopts.Authorize, hopts.ProducerSub = auth.authorize, auth.producerSub
	}
	api := httpapi.New(b, hopts)
	if !c.console {
		return api
	}
	return withConsole(api, b, auth, hist, logger)
}

// parseBytes reads a positive byte count, bare or with a KiB, MiB or GiB
// suffix (also K, M, G, KB, MB, GB, all binary). The broker checks the
// range.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	unit := int64(1)
	upper := strings.ToUpper(s)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(upper, u.suffix) {
			s, unit = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/unit {
		return 0, errors.New("not a positive byte count")
	}
	return n * unit, nil
}

// run serves until ctx ends, then shuts down; it returns the exit code.
// -version prints "queen <version>" on stdout; everything else goes to
// stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if sub := subcommands[args[0]]; sub != nil {
			return sub(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "queen:", err)
		return 2
	}
	if cfg.version {
		fmt.Fprintf(stdout, "queen %s\n", queen.Version)
		return 0
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))

	// Listen first: an address the server must not serve open is refused
	// before the store is touched.
	auth := newAuthorizer(cfg, time.Now)
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)))
	if err != nil {
		logger.Error("queen: cannot listen", "err", err)
		return 1
	}
	if auth == nil && exposed(ln.Addr()) && !cfg.allowUnauthenticated {
		_ = ln.Close()
		logger.Error("queen: refusing to listen on "+ln.Addr().String()+" with no QUEEN_TOKEN or JWT_SECRET: anyone who can reach it could read, change and delete every queue. "+
			"Set QUEEN_TOKEN (or JWT_SECRET), listen on loopback (-host 127.0.0.1, the default), or pass -allow-unauthenticated (QUEEN_ALLOW_UNAUTHENTICATED=true) to serve it open anyway",
			"host", cfg.host)
		return 2
	}

	opts := cfg.brokerOptions(logger)
	b, err := queen.Open(cfg.dataDir, opts)
	if err != nil {
		_ = ln.Close()
		logger.Error("queen: cannot open the data directory", "dir", cfg.dataDir, "err", err)
		return 1
	}

	// One history of the counters, sampled every 10 s over the last hour,
	// for the dashboards' charts.
	hist := history.New(b, &history.Options{Logger: logger})
	_ = hist.Start() // fails only after Close
	stopPolls := make(chan struct{})
	srv := &http.Server{
		Handler:           cfg.handler(b, auth, hist, logger, stopPolls),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      2 * time.Minute, // above the 60 s long-poll limit
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() { close(stopPolls) })

	durability := map[queen.Durability]string{queen.SyncEveryCommit: "sync", queen.SyncNever: "none", queen.SyncPushes: "pushes"}[cfg.durability]
	maintenance := "default"
	if opts.MaintenanceInterval > 0 {
		maintenance = opts.MaintenanceInterval.String()
	}
	logger.Info("queen: listening", "addr", ln.Addr().String(), "data", cfg.dataDir, "durability", durability,
		"subscriptionMode", string(cfg.subscription), "encryption", cfg.encryptionKey != nil, "maintenanceInterval", maintenance,
		"auth", auth.mode(), "publicMetrics", cfg.publicMetrics, "console", cfg.console, "corsOrigins", strings.Join(cfg.corsOrigins, ","))
	if auth == nil && exposed(ln.Addr()) {
		logger.Warn("queen: listening on a non-loopback address with no QUEEN_TOKEN or JWT_SECRET: anyone who can reach it can read, change and delete every queue (-allow-unauthenticated)",
			"addr", ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	code := 0
	select {
	case <-ctx.Done():
		logger.Info("queen: shutting down")
	case err := <-served:
		logger.Error("queen: server stopped", "err", err)
		code = 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("queen: requests still running at the shutdown timeout; closing them", "err", err)
		_ = srv.Close()
	}
	_ = hist.Close()
	if !closeBroker(b, logger) {
		code = 1
	}
	if code == 0 {
		logger.Info("queen: stopped")
	}
	return code
}

// closeBroker closes b and reports whether it closed cleanly.
func closeBroker(b *queen.Broker, logger *slog.Logger) bool {
	if err := b.Close(); err != nil {
		logger.Error("queen: closing the data directory", "err", err)
		return false
	}
	return true
}
