// Package httpapi serves Queen's REST API for a [queen.Broker], so that
// Queen's official JS, Python and Go clients work against a Go program
// that embeds the broker.
//
// [New] returns an [http.Handler] that serves the routes under /api/v1,
// plus /health, /metrics and /metrics/prometheus. Mount it on any router,
// under a prefix if you like, either stripping the prefix before the
// handler sees the path:
//
//	mux.Handle("/queen/", http.StripPrefix("/queen", httpapi.New(b, nil)))
//
// or letting the handler strip it with [Options.Prefix], for routers that
// pass the whole path on, such as chi's Mount:
//
//	r.Mount("/queen", httpapi.New(b, &httpapi.Options{Prefix: "/queen"}))
//
// # Wire contract
//
// Shapes, field names and status codes follow Queen's server: a push
// answers 201 with one result per item, a pop 200 with messages or 204 with
// no body, acks always 200 with one result per item, and client mistakes
// 4xx with a JSON body {"error": "..."}. Bad input never reaches the
// broker: wrong JSON types, missing fields, non-numeric query values, names
// over 255 bytes and malformed UUIDs are refused with 400 (but a
// transaction's ack naming a partitionId that is not a UUID aborts it with
// "ACK operation failed: Message not found", as the broker answers an id
// it never handed out), oversized bodies with 413. Storage failures answer 500 {"error":"internal error"}; the
// detail goes to [Options.Logger]. Routes of Queen that this broker does
// not implement (streams, shared state, the dashboard, analytics other
// than those of [Options].History) answer 404 {"error":"not supported"};
// those that read or migrate Queen's PostgreSQL database
// (/api/v1/analytics/postgres-stats, /api/v1/migration/...) answer 404
// with an error that says so.
//
// # Refused acks
//
// A refused ack item answers success false and an error text of its own
// (and so does the transaction it aborts, after "ACK operation failed: "):
//
//	"Message not found"                        queen.ErrNotFound
//	"Consumer group not found"                 queen.ErrGroupNotFound: the group never popped the queue
//	"Lease belongs to another consumer group"  queen.ErrWrongGroup
//	"Message already settled"                  queen.ErrAlreadySettled: a second ack, whatever its status
//	"Invalid or expired lease"                 queen.ErrLeaseExpired: the message comes back
//	"invalid status: X"                        an unknown status
//
// "Message not found" and "Invalid or expired lease" are Queen's own
// texts, and Queen's server answers the cases of the other new ones with
// one of them (or a second, unfenced ack with a success). Queen's clients
// only read the text, so they keep working.
//
// # Unknown queues and groups
//
// The consumer-group routes that change something (seek, partition seek,
// subscription, delete) answer 404 {"error":"Consumer group not found"}
// for a group that never popped the queue (any queue, for subscription
// and the delete without a queue), and 404 {"error":"Queue not found"}
// (partition seek: "Partition not found") for an unknown queue. Queen's
// server answers most of these 200 with nothing changed; here a typo in a
// name is a client mistake (4xx, never retried by Queen's clients), not a
// success that moved 0 partitions.
//
// # Maintenance mode
//
// POST /api/v1/system/maintenance and …/maintenance/pop with
// {"enabled": true} turn on Queen's push and pop maintenance flags, shown
// apart by GET on the same routes. While either is on, the broker is in
// maintenance mode (see [queen.Broker.SetMaintenanceMode]): pushes are
// stored, pops deliver nothing (204), and turning both off delivers what
// was pushed meanwhile. The broker stores the mode, so a restart keeps
// it; the two flags are the handler's, and a mode that is on when neither
// flag was set here (after a restart, or turned by other code) shows both.
//
// # Long polls
//
// A pop with wait=true waits until a push makes a message available, its
// timeout passes (at most 60 s), the client goes away, or the handler is
// shut down through [Options.Shutdown]. A waiting pop holds no goroutine
// beyond the request's own and uses no CPU.
//
// # Access control
//
// Authentication is the host's job. [Options.Authorize] is called before
// every route with the route's [Access] level, the same levels as Queen's
// route table but for the metrics: Queen serves them to anyone, here they
// are read-only unless [Options.PublicMetrics] says otherwise. The hook
// can refuse with 401 or 403.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/history"
)

// Broker is every method the routes call: those of [queen.Client] and the
// few more of [*queen.Broker] that inspection routes use (messages,
// traces, maintenance mode, counters and the clock). A [queen.Client]
// given to [New] that has them all serves every route; any other client
// (a remote one, say) serves the routes of queen.Client and answers the
// others 404 {"error":"not supported"}. Tests substitute fakes.
type Broker interface {
	// Now is the broker's clock: lag, ages and rates are measured against it.
	Now() time.Time

	Push(ctx context.Context, items []queen.PushItem) ([]queen.PushResult, error)
	Pop(ctx context.Context, req queen.PopRequest) (*queen.PopResult, error)
	AckBatch(ctx context.Context, items []queen.AckItem) ([]queen.AckResult, error)
	RenewLease(ctx context.Context, leaseID string, d time.Duration) (queen.LeaseRenewal, error)
	ExecTransaction(ctx context.Context, ops []queen.TxOp) (*queen.TxResult, error)

	ConfigureQueue(ctx context.Context, name string, cfg queen.QueueConfig) (*queen.QueueInfo, error)
	DescribeQueue(ctx context.Context, name string) (*queen.QueueInfo, error)
	DeleteQueue(ctx context.Context, name string) (existed bool, err error)
	Fetch(ctx context.Context, queue, partition string, from int64, limit int) (*queen.FetchResult, error)
	FetchPartitions(ctx context.Context, req queen.FetchRequest) ([]queen.PartitionRead, error)
	OffsetForTime(ctx context.Context, queue, partition string, t time.Time) (queen.TimeOffset, error)
	GroupPositions(ctx context.Context, group string, parts []queen.PartitionRef) ([]queen.Position, error)

	DeadLetters(ctx context.Context, f queen.LetterFilter) (*queen.LetterPage, error)
	ReplayDeadLetter(ctx context.Context, id string) (*queen.ReplayResult, error)
	DeleteDeadLetter(ctx context.Context, id string) error
	ParkedMessages(ctx context.Context, f queen.LetterFilter) (*queen.LetterPage, error)
	ReplayParked(ctx context.Context, id string) (*queen.ReplayResult, error)
	DeleteParked(ctx context.Context, id string) error

	QueueStats(ctx context.Context, name string) (*queen.QueueStats, error)
	ListQueues(ctx context.Context) ([]queen.QueueStats, error)
	ListGroups(ctx context.Context, f queen.GroupFilter) ([]queen.GroupStats, error)
	DeleteGroup(ctx context.Context, group, queue string, deleteMetadata bool) (int, error)
	SetGroupSubscription(ctx context.Context, group string, from time.Time) (int, error)
	SeekGroup(ctx context.Context, group, queue string, opts queen.SeekOptions) (*queen.SeekResult, error)
	SeekPartition(ctx context.Context, group, queue, partition string, opts queen.SeekOptions) (*queen.SeekResult, error)

	ListMessages(ctx context.Context, f queen.MessageFilter) (*queen.MessagePage, error)
	GetMessage(ctx context.Context, partitionID, transactionID string) (*queen.MessageInfo, error)
	DeleteMessage(ctx context.Context, partitionID, transactionID string) error

	RecordTrace(ctx context.Context, ev queen.TraceEvent) (*queen.TraceEvent, error)
	Traces(ctx context.Context, partitionID, transactionID string) ([]queen.TraceEvent, error)
	TracesByName(ctx context.Context, name string, limit, offset int) (*queen.TracePage, error)
	TraceNames(ctx context.Context, limit, offset int) (*queen.TraceNamePage, error)

	SetMaintenanceMode(ctx context.Context, on bool) error
	MaintenanceMode() bool

	Counters() queen.Counters
	Ping(ctx context.Context) error
}

var _ Broker = (*queen.Broker)(nil)

// Access is the access level of a route, as in Queen's route table.
type Access int

// Access levels, from least to most privileged.
const (
	// AccessPublic routes need no credentials: /health, and /metrics and
	// /metrics/prometheus with [Options.PublicMetrics] (in Queen they
	// always are).
	AccessPublic Access = iota
	// AccessReadOnly routes read state: listings, statistics, traces, and
	// the metrics unless [Options.PublicMetrics] is set.
	AccessReadOnly
	// AccessReadWrite routes push, pop, ack and change consumer positions.
	AccessReadWrite
	// AccessAdmin routes delete queues and consumer groups.
	AccessAdmin
)

// String returns Queen's name of the level: "public", "read-only",
// "read-write" or "admin".
func (a Access) String() string {
	switch a {
	case AccessPublic:
		return "public"
	case AccessReadOnly:
		return "read-only"
	case AccessReadWrite:
		return "read-write"
	case AccessAdmin:
		return "admin"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// Errors an [Options.Authorize] hook returns to refuse a request. The
// reply carries the error's text as {"error": "..."}.
var (
	// ErrUnauthorized refuses with 401: no credentials, or invalid ones.
	// Wrap it to say more: fmt.Errorf("%w: token expired", ErrUnauthorized).
	ErrUnauthorized = errors.New("authentication required")
	// ErrForbidden refuses with 403: valid credentials without the level.
	// Any other error an authorizer returns is treated the same way.
	ErrForbidden = errors.New("insufficient permissions")
)

// Options configures the handler. A nil *Options and zero fields mean the
// defaults.
type Options struct {
	// MaxBodyBytes caps request bodies; a larger one is refused with 413.
	// Defaults to 16 MiB.
	MaxBodyBytes int64

	// Logger receives storage failures (answered 500) and refused
	// authorizations at debug level. Defaults to discarding them.
	Logger *slog.Logger

	// Authorize, when set, is called before every route with the request
	// (read-only: it must not consume the body) and the route's access
	// level, including [AccessPublic] for /health. Returning
	// nil lets the request through; an error wrapping [ErrUnauthorized]
	// refuses it with 401, any other error with 403. CORS preflights
	// (OPTIONS) and unsupported routes are answered without calling it.
	// Defaults to letting everything through.
	Authorize func(r *http.Request, level Access) error

	// PublicMetrics makes /metrics and /metrics/prometheus [AccessPublic]
	// routes, as they are in Queen, for a scraper that sends no
	// credentials. /metrics/prometheus names every queue with its depth
	// and every consumer group with its lag, so by default both are
	// [AccessReadOnly]: an Authorize hook that lets public routes through
	// without credentials asks for them there. Defaults to false.
	PublicMetrics bool

	// ProducerSub, when set, names who pushes: it is called once per push
	// or transaction request that Authorize let through, and its result is
	// stamped on every message the request pushes as its producerSub (as
	// Queen's server stamps the token's sub claim). A producerSub sent by
	// the client is always ignored. Defaults to none (producerSub null).
	ProducerSub func(r *http.Request) string

	// Shutdown, once closed, ends every waiting long-poll at once (each
	// answers 204, as if its timeout had passed) and stops later pops from
	// waiting. Close it when the server starts shutting down, for example
	// with http.Server.RegisterOnShutdown, since Server.Shutdown otherwise
	// waits for long-polls to time out. The handler watches it with one
	// goroutine until it is closed. Defaults to nil: long-polls end only at
	// their timeout or when the client disconnects.
	Shutdown <-chan struct{}

	// DefaultTimeout is the long-poll timeout of a pop that sends none
	// (Queen's DEFAULT_TIMEOUT). Defaults to 30 s; at most 60 s.
	DefaultTimeout time.Duration

	// DefaultBatch is the batch size of a pop that sends none (Queen's
	// DEFAULT_BATCH_SIZE). Defaults to 1; at most 10000.
	DefaultBatch int

	// NoCORS turns off the CORS headers Queen puts on every reply and the
	// 204 answer to OPTIONS, for hosts that handle CORS themselves;
	// AllowedOrigins and RestrictOrigins are then ignored. Defaults to
	// false.
	NoCORS bool

	// AllowedOrigins, when set, replaces Queen's grant to every origin
	// with a list: only pages of these origins may call the API from a
	// browser. Each is an origin as browsers send it in the Origin
	// header, scheme://host[:port] without a path, such as
	// "https://dash.example.com" or "http://localhost:5173" (compared
	// without case and trailing slash); "*" allows every origin, as
	// Queen does. A request from a listed origin gets the CORS headers
	// with its own origin in Access-Control-Allow-Origin, and its
	// preflight (OPTIONS) a 204. A request a browser sends from any other
	// origin (an Origin header that is neither listed nor the request's
	// own Host, or Sec-Fetch-Site "cross-site" or "same-site") is
	// refused with 403 {"error":"origin not allowed"} and no CORS
	// headers, preflights and simple requests (a form POST, an <img>
	// GET) included, before Authorize is called. Requests without Origin
	// (Queen's clients, remote, curl) and from the handler's own origin
	// are served as usual, without CORS headers. Every reply carries
	// Vary: Origin. Defaults to nil: every origin, see RestrictOrigins.
	AllowedOrigins []string

	// RestrictOrigins applies the AllowedOrigins rules even when the list
	// is empty: then no page of another origin may call the API, and a
	// browser refuses them the replies as well. Setting AllowedOrigins
	// implies it. Defaults to false, Queen's behaviour:
	// Access-Control-Allow-Origin: * on every reply, so that Queen's
	// dashboard and browser clients served from another origin keep
	// working. A server that runs without authentication should set it
	// (cmd/queen does): with "*", any web page its users open can push,
	// pop and delete.
	RestrictOrigins bool

	// Prefix is the path the handler is mounted under, for routers that
	// pass the whole path on (chi's Mount, gorilla/mux's PathPrefix, a
	// http.ServeMux pattern without http.StripPrefix). With "/mq", a
	// request for /mq/api/v1/push is served as /api/v1/push, and a request
	// outside /mq answers 404. Authorize and the logs see the path without
	// the prefix. Use either Prefix or http.StripPrefix, not both: a path
	// already stripped no longer starts with the prefix and answers 404.
	// A missing leading slash is added and a trailing one ignored.
	// Defaults to "": the handler routes on the path as it arrives.
	Prefix string

	// History, when set, is where the analytics routes Queen's dashboard
	// charts (GET /api/v1/analytics/worker-metrics, system-metrics,
	// queue-ops, queue-lag, retention, queue-parked-replicas) and the
	// throughput and workers of GET /api/v1/status read their samples.
	// The handler only reads it: start and close it yourself (cmd/queen
	// shares one with the console). Defaults to nil: those series are
	// empty.
	History *history.Recorder
}

// Limits of the wire contract: a pop's batch, partitions and timeout are
// clamped to the broker's (A12), where a Go caller is refused.
const (
	defaultMaxBody = 16 << 20
	maxTimeout     = queen.MaxPopTimeout
	maxBatch       = queen.MaxBatch
	maxPartitions  = queen.MaxPartitions
)

// handler serves the API. It is safe for concurrent use.
type handler struct {
	b         Broker
	mux       *http.ServeMux
	log       *slog.Logger
	maxBody   int64
	authorize func(*http.Request, Access) error
	producer  func(*http.Request) string
	cors      bool
	// restrict: only origins (every one with anyOrigin) are granted CORS,
	// and requests from other origins are refused (Options.AllowedOrigins).
	restrict  bool
	anyOrigin bool
	origins   map[string]bool
	prefix    string // "" or "/name", without a trailing slash
	timeout   time.Duration
	batch     int

	// stopped is cancelled when Options.Shutdown closes; waiting pops hang
	// their cancellation on it with context.AfterFunc.
	stopped context.Context

	hist  *history.Recorder // nil: no time series
	maint maintenance       // Queen's push and pop flags

	started  time.Time
	requests atomic.Int64
	rates    rateMeter
}

// New returns a handler serving Queen's REST API on c: a [*queen.Broker],
// a remote client, or any [queen.Client] (see [Broker]). It panics if c
// is nil. opts may be nil.
func New(c queen.Client, opts *Options) http.Handler {
	if c == nil {
		panic("httpapi: New called with a nil Client")
	}
	b, ok := c.(Broker)
	if !ok {
		b = clientBroker{c}
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	h := &handler{
		b:         b,
		mux:       http.NewServeMux(),
		log:       o.Logger,
		maxBody:   o.MaxBodyBytes,
		authorize: o.Authorize,
		producer:  o.ProducerSub,
		cors:      !o.NoCORS,
		prefix:    cleanPrefix(o.Prefix),
		timeout:   o.DefaultTimeout,
		batch:     o.DefaultBatch,
		hist:      o.History,
		started:   b.Now(),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.cors && (o.RestrictOrigins || len(o.AllowedOrigins) > 0) {
		h.restrict, h.origins = true, map[string]bool{}
		for _, origin := range o.AllowedOrigins {
			switch origin = normalOrigin(origin); origin {
			case "*":
				h.anyOrigin = true
			case "":
			default:
				h.origins[origin] = true
			}
		}
	}
	if h.maxBody <= 0 {
		h.maxBody = defaultMaxBody
	}
	if h.timeout <= 0 {
		h.timeout = queen.DefaultPopTimeout
	}
	h.timeout = min(h.timeout, maxTimeout)
	if h.batch <= 0 {
		h.batch = 1
	}
	h.batch = min(h.batch, maxBatch)
	h.stopped = context.Background() // never done: AfterFunc on it costs nothing
	if o.Shutdown != nil {
		stopped, stop := context.WithCancel(context.Background())
		h.stopped = stopped
		go func() {
			<-o.Shutdown
			stop()
		}()
	}
	h.routes(o.PublicMetrics)
	return h
}

// routes registers every route with its access level; the metrics are
// public only when publicMetrics says so (see Options.PublicMetrics).
func (h *handler) routes(publicMetrics bool) {
	metrics := AccessReadOnly
	if publicMetrics {
		metrics = AccessPublic
	}
	h.handle("GET /health", AccessPublic, h.health)
	h.handle("GET /metrics", metrics, h.metricsJSON)
	h.handle("GET /metrics/prometheus", metrics, h.prometheus)

	h.handle("POST /api/v1/push", AccessReadWrite, h.push)
	h.handle("GET /api/v1/pop", AccessReadWrite, h.popDiscovery)
	h.handle("GET /api/v1/pop/queue/{queue}", AccessReadWrite, h.popQueue)
	h.handle("GET /api/v1/pop/queue/{queue}/partition/{partition}", AccessReadWrite, h.popPartition)
	h.handle("POST /api/v1/ack", AccessReadWrite, h.ack)
	h.handle("POST /api/v1/ack/batch", AccessReadWrite, h.ackBatch)
	h.handle("POST /api/v1/lease/{leaseId}/extend", AccessReadWrite, h.extendLease)
	h.handle("POST /api/v1/transaction", AccessReadWrite, h.transaction)

	h.handle("POST /api/v1/configure", AccessReadWrite, h.configure)
	h.handle("GET /api/v1/fetch/queue/{queue}/partition/{partition}", AccessReadOnly, h.fetch)
	h.handle("POST /api/v1/fetch", AccessReadOnly, h.fetchMany)
	h.handle("POST /api/v1/fetch/offsets", AccessReadOnly, h.fetchOffsets)
	h.handle("POST /api/v1/consumer-groups/positions", AccessReadOnly, h.groupPositions)

	h.handle("GET /api/v1/resources/overview", AccessReadOnly, h.overview)
	h.handle("GET /api/v1/resources/queues", AccessReadOnly, h.resourceQueues)
	h.handle("GET /api/v1/resources/queues/{queue}", AccessReadOnly, h.resourceQueue)
	h.handle("DELETE /api/v1/resources/queues/{queue}", AccessAdmin, h.deleteQueue)
	h.handle("GET /api/v1/resources/namespaces", AccessReadOnly, h.namespaces)
	h.handle("GET /api/v1/resources/tasks", AccessReadOnly, h.tasks)
	h.handle("GET /api/v1/status", AccessReadOnly, h.status)
	h.handle("GET /api/v1/status/queues", AccessReadOnly, h.statusQueues)
	h.handle("GET /api/v1/status/queues/{queue}", AccessReadOnly, h.statusQueue)
	h.handle("GET /api/v1/status/queues/{queue}/messages", AccessReadOnly, h.statusQueueMessages)

	h.handle("GET /api/v1/messages", AccessReadOnly, h.listMessages)
	h.handle("GET /api/v1/messages/{partitionId}/{transactionId}", AccessReadOnly, h.getMessage)
	h.handle("DELETE /api/v1/messages/{partitionId}/{transactionId}", AccessReadWrite, h.deleteMessage)

	h.handle("GET /api/v1/dlq", AccessReadOnly, h.listLetters(false))
	h.handle("POST /api/v1/dlq/{id}/replay", AccessReadWrite, h.replayLetter(false))
	h.handle("DELETE /api/v1/dlq/{id}", AccessAdmin, h.deleteLetter(false))
	h.handle("GET /api/v1/parked", AccessReadOnly, h.listLetters(true))
	h.handle("POST /api/v1/parked/{id}/replay", AccessReadWrite, h.replayLetter(true))
	h.handle("DELETE /api/v1/parked/{id}", AccessAdmin, h.deleteLetter(true))

	h.handle("GET /api/v1/consumer-groups", AccessReadOnly, h.listGroups)
	h.handle("GET /api/v1/consumer-groups/lagging", AccessReadOnly, h.laggingGroups)
	h.handle("GET /api/v1/consumer-groups/{group}", AccessReadOnly, h.getGroup)
	h.handle("DELETE /api/v1/consumer-groups/{group}", AccessAdmin, h.deleteGroup)
	h.handle("DELETE /api/v1/consumer-groups/{group}/queues/{queue}", AccessAdmin, h.deleteGroup)
	h.handle("POST /api/v1/consumer-groups/{group}/subscription", AccessReadWrite, h.groupSubscription)
	h.handle("POST /api/v1/consumer-groups/{group}/queues/{queue}/seek", AccessReadWrite, h.seekQueue)
	h.handle("POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", AccessReadWrite, h.seekPartition)
	h.handle("POST /api/v1/stats/refresh", AccessAdmin, h.refreshStats)

	h.handle("GET /api/v1/system/maintenance", AccessAdmin, h.getMaintenance)
	h.handle("POST /api/v1/system/maintenance", AccessAdmin, h.setMaintenance)
	h.handle("GET /api/v1/system/maintenance/pop", AccessAdmin, h.getPopMaintenance)
	h.handle("POST /api/v1/system/maintenance/pop", AccessAdmin, h.setPopMaintenance)
	h.handle("GET /api/v1/system/backup", AccessAdmin, h.backup)

	h.handle("GET /api/v1/analytics/worker-metrics", AccessReadOnly, h.workerMetrics)
	h.handle("GET /api/v1/analytics/system-metrics", AccessReadOnly, h.systemMetrics)
	h.handle("GET /api/v1/analytics/queue-ops", AccessReadOnly, h.queueOps)
	h.handle("GET /api/v1/analytics/queue-lag", AccessReadOnly, h.queueLag)
	h.handle("GET /api/v1/analytics/retention", AccessReadOnly, h.retention)
	h.handle("GET /api/v1/analytics/queue-parked-replicas", AccessReadOnly, h.queueParkedReplicas)

	h.handle("POST /api/v1/traces", AccessReadWrite, h.recordTrace)
	h.handle("GET /api/v1/traces/names", AccessReadOnly, h.traceNames)
	h.handle("GET /api/v1/traces/by-name/{name}", AccessReadOnly, h.tracesByName)
	h.handle("GET /api/v1/traces/{partitionId}/{transactionId}", AccessReadOnly, h.messageTraces)

	// Queen routes this broker does not implement.
	for _, p := range []string{
		"GET /{$}", "/api/v1/status/analytics", "/api/v1/status/buffers",
		"/api/v1/analytics/", "/api/v1/system/shared-state", "/streams/v1/", "/internal/",
		"/api/v1/stream/", "DELETE /api/v1/queues/{queue}/clear", "GET /api/v1/resources/partitions",
		"POST /api/v1/messages/{partitionId}/{transactionId}/retry", "POST /api/v1/messages/{partitionId}/{transactionId}/dlq",
	} {
		h.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusNotFound, errorBody{"not supported"})
		})
	}
	h.mux.HandleFunc("/api/v1/analytics/postgres-stats", postgresOnly)
	h.mux.HandleFunc("/api/v1/migration/", postgresOnly)
	h.mux.HandleFunc("/", h.notFound)
}

// handle registers a route behind the authorizer.
func (h *handler) handle(pattern string, level Access, fn http.HandlerFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if h.authorize != nil {
			if err := h.authorize(r, level); err != nil {
				status := http.StatusForbidden
				if errors.Is(err, ErrUnauthorized) {
					status = http.StatusUnauthorized
				}
				h.log.Debug("httpapi: request refused", "method", r.Method, "path", r.URL.Path, "level", level.String(), "err", err)
				writeJSON(w, status, errorBody{err.Error()})
				return
			}
		}
		fn(w, r)
	})
}

// notFound answers paths no route matches: 405 with Allow when another
// method would match, 404 otherwise.
func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		if m == r.Method || (m == http.MethodGet && r.Method == http.MethodHead) {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pattern := h.mux.Handler(r2); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{"method not allowed"})
		return
	}
	writeJSON(w, http.StatusNotFound, errorBody{"not found"})
}

// cleanPrefix normalizes [Options.Prefix]: a leading slash, no trailing
// one, and "" for the root.
func cleanPrefix(p string) string {
	p = strings.TrimRight(p, "/")
	if p != "" && p[0] != '/' {
		p = "/" + p
	}
	return p
}

// stripPrefix returns r with h.prefix removed from its path, or false
// when the path is outside the prefix. Like http.StripPrefix, it strips
// the raw (escaped) path too, so percent-encoded segments survive.
func (h *handler) stripPrefix(r *http.Request) (*http.Request, bool) {
	under := func(p string) (string, bool) {
		rest, ok := strings.CutPrefix(p, h.prefix)
		if !ok || (rest != "" && rest[0] != '/') { // "/mqx" is not under "/mq"
			return "", false
		}
		if rest == "" {
			rest = "/"
		}
		return rest, true
	}
	path, ok := under(r.URL.Path)
	if !ok {
		return nil, false
	}
	var raw string
	if r.URL.RawPath != "" {
		if raw, ok = under(r.URL.RawPath); !ok {
			return nil, false
		}
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path, r2.URL.RawPath = path, raw
	return r2, true
}

// normalOrigin is an origin as compared: trimmed, without a trailing
// slash, in lower case.
func normalOrigin(origin string) string {
	return strings.ToLower(strings.TrimRight(strings.TrimSpace(origin), "/"))
}

// setCORS grants origin ("*" for every one) the API's methods and
// headers.
func setCORS(hd http.Header, origin string) {
	hd.Set("Access-Control-Allow-Origin", origin)
	hd.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
	hd.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
	hd.Set("Access-Control-Max-Age", "86400")
}

// foreignOrigin reports whether a browser sent r from a page of another
// origin than the handler's: Sec-Fetch-Site says so when the browser
// sends it (it covers no-cors requests, which carry no Origin), else the
// Origin header names another host than r's.
func foreignOrigin(r *http.Request, origin string) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	case "same-origin", "none":
		return false
	}
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}

// checkOrigin applies [Options.AllowedOrigins]: it sets the CORS headers
// of an allowed origin, and answers 403 and reports false for a request
// from a page of an origin that is not allowed.
func (h *handler) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	hd := w.Header()
	if !h.restrict || h.anyOrigin {
		setCORS(hd, "*")
		return true
	}
	hd.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin != "" && h.origins[normalOrigin(origin)] {
		setCORS(hd, origin)
		return true
	}
	if foreignOrigin(r, origin) {
		h.log.Debug("httpapi: origin not allowed", "method", r.Method, "path", r.URL.Path, "origin", origin,
			"secFetchSite", r.Header.Get("Sec-Fetch-Site"))
		writeJSON(w, http.StatusForbidden, errorBody{"origin not allowed"})
		return false
	}
	return true
}

// ServeHTTP applies [Options.AllowedOrigins] and sets the CORS headers,
// strips [Options.Prefix], answers preflights, and dispatches.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.requests.Add(1)
	if h.cors && !h.checkOrigin(w, r) {
		return
	}
	if h.prefix != "" {
		r2, ok := h.stripPrefix(r)
		if !ok {
			h.log.Debug("httpapi: path outside Options.Prefix", "method", r.Method, "path", r.URL.Path, "prefix", h.prefix)
			writeJSON(w, http.StatusNotFound, errorBody{"not found"})
			return
		}
		r = r2
	}
	if h.cors && r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error("httpapi: panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeJSON(w, http.StatusInternalServerError, errorBody{"internal error"})
		}
	}()
	h.mux.ServeHTTP(w, r)
}
