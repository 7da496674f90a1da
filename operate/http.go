package operate

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/operate/access"
)

// Handler serves the operator pages and their API:
//
//	GET /, /status.html  the status page (HTML, refreshes itself every 5 s)
//	GET /fout/{id}       one handeling's detail page (ShowFout)
//	GET /overview.json   ReadOverview as JSON
//	POST /fout/retry     the CLI's fout retry: a JSON ActionRequest, answered with a BulkResult
//	POST /fout/release   the CLI's fout release, likewise
//
// An action is attributed to the operator the access.Guard authenticated (recorded as door in
// admhnd_beheer; an anonymous listener's requests may only do a dry run) and logged as "operator action" with the count, never the persons. It takes
// a JSON body only (Content-Type application/json), which a page of another site cannot send
// without the browser asking first, so the pages' own visitors cannot be made to act.
//
// The pages show persoon ids and fout reasons, so Handler serves only requests that passed an
// access.Guard (access.FromContext); any other gets 403. Every page served is recorded on log
// as "operator page viewed" with the operator, the page, the handeling (admhnd_id) and the
// HTTP status, never with persons. nil log means slog.Default().
//
// leader, when not nil, names this instance and says whether it publishes now; the page shows
// it next to the lease. A database error yields 503 (the status page keeps refreshing).
func Handler(db *sqlx.DB, cfg OverviewConfig, leader func() (instance string, leading bool), log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	s := &server{db: db, cfg: cfg, leader: leader, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.status)
	mux.HandleFunc("GET /status.html", s.status)
	mux.HandleFunc("GET /fout/{id}", s.fout)
	mux.HandleFunc("GET /overview.json", s.json)
	mux.HandleFunc("POST /fout/retry", s.act)
	mux.HandleFunc("POST /fout/release", s.act)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := access.FromContext(r.Context()); !ok {
			log.Error("operator pages reached without access.Guard; refused", slog.String("path", r.URL.Path))
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type server struct {
	db     *sqlx.DB
	cfg    OverviewConfig
	leader func() (string, bool)
	log    *slog.Logger
}

// viewed records that the request's operator was shown page (with code); id names the
// handeling of a detail page, 0 for none.
func (s *server) viewed(r *http.Request, page string, id int64, code int) {
	op, _ := access.FromContext(r.Context())
	attrs := []any{slog.String("operator", op.Name), slog.String("auth", op.Method), slog.String("page", page)}
	if id != 0 {
		attrs = append(attrs, slog.Int64("admhnd_id", id))
	}
	attrs = append(attrs, slog.Int("status", code), slog.String("remote_addr", r.RemoteAddr))
	s.log.Info("operator page viewed", attrs...)
}

type statusPage struct {
	O        Overview
	Instance string
	Leading  bool
	Known    bool // leader was given
	Max      int64
}

type foutPage struct {
	D   FoutDetail
	Now time.Time
}

type errorPage struct {
	Title, Message string
	Refresh        bool
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	o, err := ReadOverview(r.Context(), s.db, s.cfg)
	if err != nil {
		s.log.Warn("status page: overview failed", slog.Any("error", err))
		s.render(w, http.StatusServiceUnavailable, "error", errorPage{"Status unavailable", err.Error(), true})
		s.viewed(r, "status", 0, http.StatusServiceUnavailable)
		return
	}
	p := statusPage{O: o, Max: 1}
	for _, n := range o.DeliveredPerMinute {
		p.Max = max(p.Max, n)
	}
	if s.leader != nil {
		p.Instance, p.Leading = s.leader()
		p.Known = true
	}
	s.viewed(r, "status", 0, s.render(w, http.StatusOK, "status", p))
}

func (s *server) fout(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.render(w, http.StatusBadRequest, "error", errorPage{"Bad handeling id", "Not a number: " + r.PathValue("id"), false})
		return
	}
	d, err := ShowFout(r.Context(), s.db, id, s.cfg)
	var code int
	switch {
	case errors.Is(err, ErrNotFound):
		code = s.render(w, http.StatusNotFound, "error", errorPage{"Not found", "There is no handeling " + strconv.FormatInt(id, 10) + ".", false})
	case err != nil:
		s.log.Warn("status page: show fout failed", slog.Int64("admhnd_id", id), slog.Any("error", err))
		code = s.render(w, http.StatusServiceUnavailable, "error", errorPage{"Handeling unavailable", err.Error(), false})
	default:
		code = s.render(w, http.StatusOK, "fout", foutPage{D: d, Now: time.Now()})
	}
	s.viewed(r, "fout", id, code)
}

func (s *server) json(w http.ResponseWriter, r *http.Request) {
	o, err := ReadOverview(r.Context(), s.db, s.cfg)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		s.viewed(r, "overview.json", 0, http.StatusServiceUnavailable)
		return
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(o)
	s.viewed(r, "overview.json", 0, http.StatusOK)
}

// render writes the page and returns the HTTP status sent.
func (s *server) render(w http.ResponseWriter, code int, name string, data any) int {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("status page: template failed", slog.String("template", name), slog.Any("error", err))
		http.Error(w, "template error", http.StatusInternalServerError)
		return http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Defence in depth behind html/template's escaping: no script runs, nothing is fetched.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
	return code
}

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"age":   FormatAge,
	"num":   formatNum,
	"ts":    func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05.000") },
	"tsp":   func(t *time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
	"tss":   func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
	"pct":   func(n, m int64) int64 { return max(2, n*100/max(m, 1)) },
	"join":  func(ids []int64) string { return joinIDs(ids, ", ") },
	"int64": func(n int) int64 { return int64(n) },
	"skew":  func() string { return FormatAge(handeling.FutureSkew.Seconds()) },
	"since": func(now, t time.Time) string {
		return FormatAge(now.Sub(t).Seconds())
	},
	// The statuses, for comparisons: {{if eq .Statuslev statusFout}}.
	"statusInLevering": func() handeling.Status { return handeling.InLevering },
	"statusGeleverd":   func() handeling.Status { return handeling.Geleverd },
	"statusFout":       func() handeling.Status { return handeling.Fout },
}).ParseFS(templates, "templates/*.html"))

// formatNum groups digits by three with thin spaces: 1 234 567.
func formatNum(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// joinIDs writes ids in decimal, separated by sep.
func joinIDs(ids []int64, sep string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, sep)
}

// ActionRequest is the body of POST /fout/retry and /fout/release: one handeling (ID), or a
// Selection, as the CLI takes them.
type ActionRequest struct {
	ID int64 `json:"id,omitempty"`
	Selection
	DryRun bool   `json:"dry_run,omitempty"`
	Note   string `json:"note,omitempty"`
}

// maxActionBody bounds an action's request body.
const maxActionBody = 64 << 10

func (s *server) act(w http.ResponseWriter, r *http.Request) {
	actie := strings.TrimPrefix(r.URL.Path, "/fout/")
	op, _ := access.FromContext(r.Context())
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(code int, err error) { reply(code, map[string]string{"error": err.Error()}) }
	if ct := r.Header.Get("Content-Type"); ct != "application/json" && !strings.HasPrefix(ct, "application/json;") {
		fail(http.StatusUnsupportedMediaType, errors.New("send the request as application/json"))
		return
	}
	var req ActionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(http.StatusBadRequest, fmt.Errorf("request body: %w", err))
		return
	}
	bulk := req.All || req.Narrowed()
	switch {
	case op.Name == "" && !req.DryRun:
		fail(http.StatusForbidden, errors.New("an action is recorded with the operator who takes it: this listener lets operators in without a name (anonymous), so it only shows"))
		return
	case req.ID != 0 && (bulk || req.DryRun):
		fail(http.StatusBadRequest, errors.New("give an id or a selection (all, reason, since, until, person), not both"))
		return
	case req.ID == 0 && !bulk:
		fail(http.StatusBadRequest, ErrEmptySelection)
		return
	case bulk:
		if err := req.Selection.validate(); err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
	}
	var res BulkResult
	var err error
	if req.ID != 0 {
		one := Retry
		if actie == "release" {
			one = Release
		}
		if err = one(r.Context(), s.db, s.cfg.Layout, req.ID, op.Name, req.Note); err == nil {
			res = BulkResult{Selected: 1, Done: 1, Batches: 1, First: []Fout{}}
		}
	} else {
		many := RetryMany
		if actie == "release" {
			many = ReleaseMany
		}
		res, err = many(r.Context(), s.db, s.cfg.Layout, req.Selection, op.Name, req.Note, req.DryRun)
	}
	code := http.StatusOK
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrNotFout), errors.Is(err, ErrAlreadyReleased):
		code = http.StatusConflict
	case errors.Is(err, ErrActorRequired):
		code = http.StatusBadRequest
	case err != nil:
		code = http.StatusServiceUnavailable
	}
	s.log.Info("operator action", slog.String("operator", op.Name), slog.String("auth", op.Method), slog.String("action", actie),
		slog.Int64("admhnd_id", req.ID), slog.Bool("selection", bulk), slog.Bool("dry_run", req.DryRun),
		slog.Int64("selected", res.Selected), slog.Int64("done", res.Done), slog.Int("status", code), slog.String("remote_addr", r.RemoteAddr))
	if err != nil {
		if code == http.StatusServiceUnavailable {
			s.log.Warn("operator action failed", slog.String("action", actie), slog.Any("error", err))
		}
		fail(code, err)
		return
	}
	reply(code, res)
}
