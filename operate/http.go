package operate

import (
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Handler serves the operator pages, read-only (actions stay on the command line, where they
// are attributed to a person):
//
//	GET /, /status.html  the status page (HTML, refreshes itself every 5 s)
//	GET /fout/{id}       one handeling's detail page (ShowFout)
//	GET /overview.json   ReadOverview as JSON
//
// leader, when not nil, names this instance and says whether it publishes now; the page shows
// it next to the lease. A database error yields 503 (the status page keeps refreshing).
func Handler(db *sqlx.DB, cfg OverviewConfig, leader func() (instance string, leading bool)) http.Handler {
	s := &server{db: db, cfg: cfg, leader: leader}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.status)
	mux.HandleFunc("GET /status.html", s.status)
	mux.HandleFunc("GET /fout/{id}", s.fout)
	mux.HandleFunc("GET /overview.json", s.json)
	return mux
}

type server struct {
	db     *sqlx.DB
	cfg    OverviewConfig
	leader func() (string, bool)
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
		slog.Warn("status page: overview failed", slog.Any("error", err))
		s.render(w, http.StatusServiceUnavailable, "error", errorPage{"Status unavailable", err.Error(), true})
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
	s.render(w, http.StatusOK, "status", p)
}

func (s *server) fout(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.render(w, http.StatusBadRequest, "error", errorPage{"Bad handeling id", "Not a number: " + r.PathValue("id"), false})
		return
	}
	d, err := ShowFout(r.Context(), s.db, id, s.cfg)
	switch {
	case errors.Is(err, ErrNotFound):
		s.render(w, http.StatusNotFound, "error", errorPage{"Not found", "There is no handeling " + strconv.FormatInt(id, 10) + ".", false})
	case err != nil:
		slog.Warn("status page: show fout failed", slog.Int64("admhnd_id", id), slog.Any("error", err))
		s.render(w, http.StatusServiceUnavailable, "error", errorPage{"Handeling unavailable", err.Error(), false})
	default:
		s.render(w, http.StatusOK, "fout", foutPage{D: d, Now: time.Now()})
	}
}

func (s *server) json(w http.ResponseWriter, r *http.Request) {
	o, err := ReadOverview(r.Context(), s.db, s.cfg)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(o)
}

func (s *server) render(w http.ResponseWriter, code int, name string, data any) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		slog.Error("status page: template failed", slog.String("template", name), slog.Any("error", err))
		http.Error(w, "template error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Defence in depth behind html/template's escaping: no script runs, nothing is fetched.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
}

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"age":   FormatAge,
	"num":   formatNum,
	"ts":    func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05.000") },
	"tsp":   func(t *time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
	"tss":   func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
	"pct":   func(n, m int64) int64 { return max(2, n*100/max(m, 1)) },
	"join":  func(ids []int64) string { return JoinIDs(ids, ", ") },
	"int64": func(n int) int64 { return int64(n) },
	"since": func(now, t time.Time) string {
		return FormatAge(now.Sub(t).Seconds())
	},
}).Parse(templates))

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

// JoinIDs writes ids in decimal, separated by sep.
func JoinIDs(ids []int64, sep string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, sep)
}
