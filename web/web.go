// Package web serves the compactor's live status page (DESIGN.md §8): running
// jobs with progress, the queue, recent history, dead-lettered collections and
// the largest backlogs; a page per job and per collection (with server-side
// SVG charts); "compact now" and "cancel" actions; and live updates over
// Server-Sent Events.
//
// The package knows nothing of the manager, the catalog or the RPC layer. It
// declares the view models it shows and the small read-and-act interface it
// needs ([Source]); the binary wires an adapter. Pages are templ components
// fed by view structs that plain Go functions build, so the templates stay
// dumb and every value they print is escaped.
//
// Routes (all under the root of the handler; mount it at "/"):
//
//	GET  /                          dashboard (filters: state, trigger, collection, limit)
//	GET  /jobs/{id}                 one job
//	POST /jobs/{id}/cancel          cancel a job (form: next)
//	GET  /collections               all collections (sort=name|backlog|records|last_compacted, dir=asc|desc)
//	GET  /collections/{id}          one collection, its jobs and charts
//	POST /collections/{id}/compact  one-off compaction (form: reason, next)
//	GET  /events                    Server-Sent Events: "change" on every Source tick
//	GET  /login, POST /login        sign in with the token (sets a cookie)
//	POST /logout                    sign out
//	GET  /static/...                embedded CSS and script
//
// Every page accepts partial=1 and then returns only the content of its
// <main id="main"> element; the embedded script uses it to refresh the page
// in place when /events reports a change. Without JavaScript, pages reload
// themselves every Config.RefreshSeconds.
//
// Wiring, in the binary:
//
//	h, err := web.NewHandler(adapter, web.Config{
//		Token:  token,      // the server's bearer token; "" for none
//		Logger: logger,
//		Done:   ctx.Done(), // the serve context: ends event streams at shutdown
//	})
//	mux.Handle("/", h) // the RPC, /metrics and health routes are more specific
//
// Security: responses carry a strict Content-Security-Policy (no inline
// script or style); every POST passes http.CrossOriginProtection; with a
// token, actions need the sign-in cookie (HttpOnly, SameSite=Strict, a MAC
// of the token rather than the token) or an Authorization: Bearer header.
package web

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

	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/internal/auth"
	"github.com/compactorhq/compactor/internal/collorder"
	"github.com/compactorhq/compactor/internal/flagcheck"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// Job states and triggers, as the Source reports them.
const (
	StateQueued    = "QUEUED"
	StateRunning   = "RUNNING"
	StateSucceeded = "SUCCEEDED"
	StateFailed    = "FAILED"
	StateCancelled = "CANCELLED"

	TriggerScheduled = "SCHEDULED"
	TriggerOneOff    = "ONE_OFF"

	KindCompaction   = "compaction"
	KindIndexRebuild = "index_rebuild"
	KindVerify       = "verify"
	KindRollback     = "rollback"
)

// Sentinel errors a Source returns (wrapped or not; they are matched with
// errors.Is).
var (
	// ErrNotFound: no job or collection with that id. Pages answer 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the action cannot be done in the current state (cancel of
	// a finished job, compaction refused). The page shows a notice instead
	// of an error.
	ErrConflict = errors.New("conflict")
)

// Job is a job (a compaction, an index rebuild) as the page shows it. Times are UTC; a zero time
// means "not yet" (StartedAt of a queued job) or unknown.
type Job struct {
	ID             string
	CollectionID   string
	CollectionName string // may be empty; the page then looks it up or shows the id
	// Kind is what the job does: KindCompaction, KindIndexRebuild,
	// KindVerify ("" is a compaction; another value is shown as it is).
	Kind    string
	Trigger string // TriggerScheduled or TriggerOneOff
	State   string // StateQueued … StateCancelled
	Reason  string
	Error   string // error text of a failed job
	Note    string // e.g. "nothing to compact", "interrupted"
	Node    string // the node that ran it
	// TriggeredBy is who asked for the job (a credential's name,
	// "anonymous" without authentication); "" for the scheduler's.
	TriggeredBy  string
	Attempt      int
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	OffsetStart  int64 // log offsets covered: (OffsetStart, OffsetEnd]
	OffsetEnd    int64
	RecordsRead  int64 // progress: records read so far …
	RecordsTotal int64 // … of this many (0: unknown)
	// Progress of a running job: its phase ("reading log", "materializing",
	// "writing blocks", "indexing", "committing"), the fraction of the whole job done
	// (0 to 1), the time left (meaningful only when ETAKnown) and the
	// blocks written of BlocksTotal (0: not known yet).
	Phase                      string
	Fraction                   float64
	ETA                        time.Duration
	ETAKnown                   bool
	BlocksWritten, BlocksTotal int64
	// VectorsIndexed of VectorsTotal: the vectors an index rebuild has
	// inserted (0: not counted).
	VectorsIndexed, VectorsTotal int64
	RecordsWritten               int64
	BytesWritten                 int64
	VersionBefore                int64
	VersionAfter                 int64
	// FailureClass of a failed job: "infrastructure", "data" or
	// "internal"; "" otherwise.
	FailureClass string
	// Predicted is the prediction made when the job was claimed (nil:
	// none); Actual what it did in the same units (nil while it runs).
	Predicted *jobtype.Prediction
	Actual    *jobtype.Actual
}

// Collection is a collection as the page shows it.
type Collection struct {
	ID                  string
	Name                string
	Dimension           int
	Backlog             int64 // uncompacted log records
	RecordCount         int64 // records in the current segment version
	SegmentVersion      int64
	LogPosition         int64
	CompactionOffset    int64
	FailureCount        int // consecutive failures
	DeadLettered        bool
	DeadLetteredAt      time.Time
	OldestUncompactedAt time.Time // zero when the backlog is empty
	LastCompactedAt     time.Time // zero if never compacted
	CreatedAt           time.Time
	// Its automatic compaction is paused (one-off compactions still run).
	Paused      bool
	PauseReason string
	PausedBy    string
	PausedAt    time.Time
	// Its overrides of the scheduler's thresholds; 0: the server's.
	MinCompactionSize int64
	MaxUncompactedAge time.Duration
	// Its scheduling policy: priority class ("critical", "normal", "low";
	// "" reads as normal), compaction windows (empty: the server's) and
	// freshness objectives (0: none).
	Priority            string
	Windows             []string
	ObjectiveMaxAge     time.Duration
	ObjectiveMaxBacklog int64
	// ThroughputShare: the fraction of the throughput cap its compactions
	// may write while others write on the node; 0: none.
	ThroughputShare float64
	// FreshnessDebt is how close it is to breaking an objective (the
	// larger of age and backlog over their objectives; 1 and more:
	// broken), as the Source computed it; 0 without objectives.
	FreshnessDebt float64
	// Storage: the bytes and blocks of the current segment version, and
	// the versions whose blobs are kept (the current one, those retained
	// for readers, and retired ones until GC deletes them).
	SegmentBytes int64
	BlockCount   int
	VersionsKept int
	// Index is the vector index: the collection's settings, and what the
	// current version's index holds (on the collection page only).
	Index CollectionIndex
	// Versions is the version history, newest first (on the collection
	// page only).
	Versions []CollectionVersion
}

// CollectionVersion is one committed segment version of a collection.
type CollectionVersion struct {
	Version   int64
	CreatedAt time.Time
	// The log offsets it covers: (OffsetStart, CompactionOffset];
	// OffsetStart -1 when not known.
	OffsetStart, CompactionOffset int64
	JobID                         string // the job that wrote it; "" for a rollback
	RecordCount, SegmentBytes     int64
	BlockCount                    int
	Current                       bool // the collection's current version
	Kept                          bool // readable by version, a rollback target; false once retired
	// RollbackOf is the version a rollback restored (0: not a rollback),
	// with the operator's reason and name.
	RollbackOf        int64
	Reason, CreatedBy string
	// Digest and Verification as the manifest records them; "" when it
	// records none.
	Digest, Verification string
}

// CollectionIndex is a collection's vector index settings and, when its
// current version has one, that index's figures.
type CollectionIndex struct {
	Disabled                     bool
	Distance                     string // "cosine"
	M, EfConstruction, EfSearch  int
	Built                        bool // the current version has an index
	Vectors, Tombstones, Dropped int
	Bytes                        int64  // graph and chunk blobs
	Build                        string // "full", "incremental" or "repaired"
	BuiltAt                      time.Time
	BuildSeconds                 float64
}

// Controls are the operators' global controls of automatic compaction.
type Controls struct {
	Paused bool // automatic compaction is paused on every collection
	Reason string
	By     string
	Since  time.Time
	// MaxThroughput is the cap on bytes per second written by compactions
	// in force on the serving node; 0: none. A job writing blocks under a
	// cap is throttled: its progress moves at the cap's pace.
	MaxThroughput int64
	// ThroughputOverride: the cap was set at run time for every node
	// (ThroughputBy, ThroughputSince), not by the node's --max-throughput.
	ThroughputOverride bool
	ThroughputBy       string
	ThroughputSince    time.Time
}

// PlanEntry is the scheduler's decision for one collection on its next run.
type PlanEntry struct {
	CollectionID   string
	CollectionName string
	// Decision: "run" when a job would be queued; otherwise what holds the
	// collection back ("paused", "collection-paused", "dead-lettered",
	// "backing-off", "outside-window", "running", "queued",
	// "below-thresholds", "empty").
	Decision string
	Reason   string // why, in words
	Backlog  int64
	// Priority is the collection's class ("critical", "normal", "low").
	Priority string
	// FreshnessDebt: see Collection.FreshnessDebt.
	FreshnessDebt float64
	// Windows are the compaction windows in force (empty: any time);
	// WindowOpen says whether one is open; NextWindowStart..NextWindowEnd
	// is the window open now (start = the plan's time) or the next; a
	// zero NextWindowEnd: windows that stay open all week never close.
	Windows                        []string
	WindowOpen                     bool
	NextWindowStart, NextWindowEnd time.Time
	// Estimate prices the job, for "run" when the plan was asked to
	// estimate; nil otherwise. EstimateError says why it is missing.
	Estimate      *jobtype.Prediction
	EstimateError string
}

// DeadLetterEvent is one change of a collection's dead-letter state:
// Event "dead-lettered", "redriven" (Cause "cool-off" or "upgrade"),
// "cleared" (by Actor, for Reason) or "recovered".
type DeadLetterEvent struct {
	At                   time.Time
	Event, Cause, Build  string
	Actor, Reason, JobID string
	Failures             int
}

// Node is a replica of the server as the page shows it.
type Node struct {
	Name        string
	Address     string
	Version     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	Alive       bool // heartbeat recent; false: the replica is gone
	Self        bool // the replica serving the page
}

// Point is one sample of a time series.
type Point struct {
	At    time.Time
	Value float64
}

// JobQuery selects jobs. Zero fields do not filter.
type JobQuery struct {
	States       []string // any of these states
	CollectionID string
	Trigger      string
	Limit        int // at most this many (newest first); 0: the Source's default
}

// The orders of CollectionQuery.Sort.
const (
	SortName          = collorder.Name          // by name (byte order, as the API's ListCollections)
	SortBacklog       = collorder.Backlog       // by backlog, ties by name ascending
	SortRecords       = collorder.Records       // by records, ties by name ascending
	SortLastCompacted = collorder.LastCompacted // by the last compaction (never: earliest), ties by name ascending
)

// CollectionQuery selects a page of collections.
type CollectionQuery struct {
	Sort string // one of the Sort constants; "" is SortName
	// Desc reverses the order (of a figure; ties stay by name ascending).
	Desc bool
	// After starts the page after a position; Before, when set instead,
	// ends it before one (the previous page). Both nil: the first page.
	After, Before *CollectionCursor
	Limit         int // collections in the page, 1..10,000
}

// CollectionCursor is a collection's position in an order: its name and,
// in a figure's order, its figure (backlog or records, or the last
// compaction in unix milliseconds, 0 for never: CursorOf). It is the
// catalog's cursor too.
type CollectionCursor = collorder.Cursor

// CursorOf is c's position in order sort.
func CursorOf(c Collection, sort string) CollectionCursor {
	return collorder.Of(sort, c.Name, c.Backlog, c.RecordCount, c.LastCompactedAt)
}

// CollectionPage is a page of collections.
type CollectionPage struct {
	Collections []Collection // in the query's order
	Total       int          // collections in all
	// More: collections follow the page in the direction it was read
	// (after it, or before it for a query with Before).
	More bool
}

// SummaryQuery bounds the lists of a CollectionSummary.
type SummaryQuery struct {
	Largest int // the most collections in Largest
	Names   int // the most collections in Names
}

// CollectionSummary is what the dashboard shows of the collections as a
// whole.
type CollectionSummary struct {
	Count   int   // collections
	Backlog int64 // uncompacted records of every collection
	// Notable are every collection that is dead-lettered or has a
	// freshness objective (so may be at risk), in any order.
	Notable []Collection
	// Largest are the collections with the largest backlogs (those with
	// one), largest first: at most SummaryQuery.Largest.
	Largest []Collection
	// Names are the first collections by name, at most
	// SummaryQuery.Names: all of them when Count is no more.
	Names []Collection
}

// Source is what the page reads and does. Implementations must be safe for
// concurrent use; every method may be called from many requests at once.
type Source interface {
	// Jobs returns the jobs matching q, newest (by CreatedAt) first.
	Jobs(ctx context.Context, q JobQuery) ([]Job, error)
	// Job returns one job, or an error matching ErrNotFound.
	Job(ctx context.Context, id string) (Job, error)
	// Queue returns the QUEUED jobs in the order they will run (the
	// Source's claim order; the page does not sort them again).
	Queue(ctx context.Context) ([]Job, error)
	// Nodes returns the replicas of the server, by name.
	Nodes(ctx context.Context) ([]Node, error)
	// Controls returns the global pause of automatic compaction.
	Controls(ctx context.Context) (Controls, error)
	// Plan returns what the scheduler would do on its next run: the
	// collections it would compact first, in order, then the others; with
	// estimate, the ones it would compact carry a priced Estimate.
	Plan(ctx context.Context, estimate bool) ([]PlanEntry, error)
	// DeadLetterHistory returns a collection's dead-letter events, newest
	// first (at most 20).
	DeadLetterHistory(ctx context.Context, collectionID string) ([]DeadLetterEvent, error)
	// Pause pauses automatic compaction of a collection, or of every one
	// when collectionID is ""; ErrNotFound for an unknown collection.
	Pause(ctx context.Context, collectionID, reason, by string) error
	// Resume ends a pause made by Pause.
	Resume(ctx context.Context, collectionID, by string) error
	// CollectionsPage returns one page of collections in q's order, with
	// the number of collections in all; its cost follows the page, not
	// the number of collections.
	CollectionsPage(ctx context.Context, q CollectionQuery) (CollectionPage, error)
	// CollectionSummary returns what the dashboard shows of the
	// collections as a whole (see CollectionSummary), without reading
	// every collection.
	CollectionSummary(ctx context.Context, q SummaryQuery) (CollectionSummary, error)
	// Collection returns one collection, or an error matching ErrNotFound.
	Collection(ctx context.Context, id string) (Collection, error)
	// BacklogHistory returns backlog samples of a collection, oldest first.
	BacklogHistory(ctx context.Context, collectionID string) ([]Point, error)
	// Subscribe returns a channel that receives a value on every job or
	// collection change (ticks may be coalesced or dropped by the Source
	// when the reader is slow) and is closed when ctx ends.
	Subscribe(ctx context.Context) (<-chan struct{}, error)
	// Compact enqueues a one-off compaction of a collection and returns the
	// job's id (the already queued job's id when there is one).
	Compact(ctx context.Context, collectionID, reason string) (jobID string, err error)
	// Cancel cancels a queued or running job; ErrConflict when it has
	// already finished.
	Cancel(ctx context.Context, jobID string) error
}

// Config tunes the page. The zero value, with defaults filled in by
// NewHandler, is valid: no authentication, 10 s no-script refresh.
type Config struct {
	// Auth, when it holds credentials, is required (as a sign-in cookie
	// made by /login, or an "Authorization: Bearer" header) for every
	// action, which the principal's role must allow (compact, cancel,
	// pause and resume: operator; the audit view: operator); with
	// ProtectReads, a sign-in is required for every page too. Nil: Token
	// alone.
	Auth *auth.Authenticator
	// Token, when set and Auth is nil, is the single admin credential.
	// Empty, with Auth nil: no authentication. Tokens are never logged.
	Token string
	// ProtectReads requires a sign-in for pages and /events too.
	ProtectReads bool
	// Now is the clock for relative times ("3m ago"), ETAs and the 24 h
	// window. Nil: time.Now.
	Now func() time.Time
	// Logger receives errors (under key "err") and actions. Nil: discard.
	Logger *slog.Logger
	// RefreshSeconds is the reload interval of pages viewed without
	// JavaScript (a <noscript> meta refresh). 0: 10.
	RefreshSeconds int
	// Build, when its Version is set, is shown in the footer of every page.
	Build Build
	// TrustedOrigins are origins ("https://ops.example.com") whose
	// cross-origin form posts are accepted, e.g. behind a proxy that
	// rewrites Host. Empty: same origin only.
	TrustedOrigins []string
	// Done, when closed, ends every open event stream, so that
	// http.Server.Shutdown need not wait for them. Typically the serve
	// context's Done(). Streams also end when their request ends.
	Done <-chan struct{}
	// Heartbeat is the interval of the comment lines that keep an idle
	// event stream open through proxies. 0: 15 s.
	Heartbeat time.Duration
	// MinEventInterval coalesces Source ticks: at most one event per
	// interval per stream. 0: 500 ms.
	MinEventInterval time.Duration
	// MaxStreams bounds the event streams open at once (each holds a
	// Subscribe); beyond it /events answers 503. 0: 100.
	MaxStreams int
}

// RegisterFlags registers the page's own flags on fs with c's values as
// defaults. The token is the server's and is registered by the binary.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.RefreshSeconds, "web-refresh", c.RefreshSeconds, "reload interval in seconds of status pages viewed without JavaScript (0: 10)")
	fs.StringSliceVar(&c.TrustedOrigins, "web-trusted-origin", c.TrustedOrigins, "origin (scheme://host[:port]) whose cross-origin form posts the status page accepts; repeatable")
}

// Validate rejects negative intervals and counts, malformed trusted
// origins, and ProtectReads without a token.
func (c Config) Validate() error {
	if err := flagcheck.First(
		flagcheck.NotNegative("--web-refresh", c.RefreshSeconds),
		flagcheck.NotNegative("web heartbeat", c.Heartbeat),
		flagcheck.NotNegative("web event interval", c.MinEventInterval),
		flagcheck.NotNegative("web max streams", c.MaxStreams),
		flagcheck.That(!c.ProtectReads || c.Token != "" || c.Auth.Enabled(), "web protect reads needs a token"),
	); err != nil {
		return err
	}
	for _, o := range c.TrustedOrigins {
		if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil {
			return fmt.Errorf("--web-trusted-origin: %w", err)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RefreshSeconds == 0 {
		c.RefreshSeconds = 10
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.MinEventInterval == 0 {
		c.MinEventInterval = 500 * time.Millisecond
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = 100
	}
	return c
}

type handler struct {
	src     Source
	cfg     Config
	log     *slog.Logger
	auth    *auth.Authenticator // the credentials the RPC API uses too
	static  *staticFiles
	streams atomic.Int64
}

// NewHandler returns the page's handler. It is meant to be mounted at "/"
// (links are absolute). Every non-GET request passes
// http.CrossOriginProtection, so a cross-origin form post gets 403.
func NewHandler(src Source, cfg Config) (http.Handler, error) {
	if src == nil {
		return nil, errors.New("web: nil source")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	st, err := newStaticFiles()
	if err != nil {
		return nil, err
	}
	h := &handler{
		src:    src,
		cfg:    cfg,
		log:    cfg.Logger.With("component", "web"),
		static: st,
	}
	h.auth = cfg.Auth
	if h.auth == nil {
		h.auth = auth.NewAuthenticator(auth.SingleToken(cfg.Token))
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.dashboard)
	mux.HandleFunc("GET /jobs/{id}", h.jobPage)
	mux.HandleFunc("POST /jobs/{id}/cancel", h.cancel)
	mux.HandleFunc("GET /collections", h.collectionsPage)
	mux.HandleFunc("GET /audit", h.auditPage)
	mux.HandleFunc("GET /collections/{id}", h.collectionPage)
	mux.HandleFunc("POST /collections/{id}/compact", h.compact)
	mux.HandleFunc("POST /collections/{id}/pause", h.pause)
	mux.HandleFunc("POST /collections/{id}/resume", h.resume)
	mux.HandleFunc("POST /pause", h.pause)
	mux.HandleFunc("POST /resume", h.resume)
	mux.HandleFunc("GET /plan", h.planPage)
	mux.HandleFunc("GET /events", h.events)
	mux.HandleFunc("GET /login", h.loginPage)
	mux.HandleFunc("POST /login", h.login)
	mux.HandleFunc("POST /logout", h.logout)
	mux.Handle("GET /static/{file}", h.static)
	mux.HandleFunc("GET /jobs/{id}/cancel", postOnly)
	mux.HandleFunc("GET /collections/{id}/compact", postOnly)
	mux.HandleFunc("GET /collections/{id}/pause", postOnly)
	mux.HandleFunc("GET /collections/{id}/resume", postOnly)
	mux.HandleFunc("GET /pause", postOnly)
	mux.HandleFunc("GET /resume", postOnly)
	mux.HandleFunc("GET /logout", postOnly)
	mux.HandleFunc("/", h.notFound)

	cop := http.NewCrossOriginProtection()
	for _, o := range cfg.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("--web-trusted-origin: %w", err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(h.crossOrigin))
	return securityHeaders(cop.Handler(mux)), nil
}

// postOnly answers a GET of an action's URL.
func postOnly(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	http.Error(w, "method not allowed: this action needs a POST form", http.StatusMethodNotAllowed)
}

// securityHeaders sets headers that hold for every response: a strict
// content security policy (no inline script or style at all), no framing,
// no sniffing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// localPath returns s when it is a path on this site (so that a redirect to
// it cannot leave the site), else "/". The partial, flash and job
// parameters are dropped. It is idempotent (localPath(localPath(s)) ==
// localPath(s)): a result that would not pass through it unchanged, such as
// one that decodes into "//" ("/%2F%2F " becomes "///%20"), is "/".
func localPath(s string) string {
	out := localPathOnce(s)
	if localPathOnce(out) != out {
		return "/"
	}
	return out
}

func localPathOnce(s string) string {
	if s == "" || s[0] != '/' || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\r\n\t") {
		return "/"
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") {
		return "/"
	}
	q := u.Query()
	q.Del("partial")
	q.Del("flash")
	q.Del("job")
	u.RawQuery = q.Encode()
	u.Fragment = ""
	return u.RequestURI()
}

// withFlash returns the local path next with a flash code (and job id) added.
func withFlash(next, code, jobID string) string {
	u, err := url.Parse(localPath(next))
	if err != nil {
		return "/"
	}
	q := u.Query()
	q.Set("flash", code)
	if jobID != "" {
		q.Set("job", jobID)
	}
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

func jobURL(id string) string        { return "/jobs/" + url.PathEscape(id) }
func collectionURL(id string) string { return "/collections/" + url.PathEscape(id) }

// Build identifies the running build for the page footer.
type Build struct {
	Version  string // v1.4.0, or (devel)
	Revision string // VCS commit; shown shortened to 12 characters
	Time     string // RFC 3339 commit or build time
	Modified bool   // built from a tree with local changes
}
