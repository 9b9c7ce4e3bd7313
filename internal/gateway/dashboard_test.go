package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/task"
)

// The dashboard and the alerts of docs/deploy.md, "Dashboard and alerts".
const (
	dashboardFile = "../../docs/grafana/tether-dashboard.json"
	alertsFile    = "../../docs/grafana/alerts.yml"
)

// query is one PromQL expression of the dashboard or the alerts, and where.
type query struct{ where, expr string }

// TestDashboardAndAlertsUseExposedMetrics: every metric named by a panel,
// the dashboard's variable or an alert is exposed on the /metrics of a real
// gateway and a real runner after some traffic, so a renamed or misspelt
// metric fails here instead of drawing an empty panel or an alert that can
// never fire.
func TestDashboardAndAlertsUseExposedMetrics(t *testing.T) {
	t.Parallel()
	queries := append(dashboardQueries(t), alertQueries(t)...)

	exposed := trafficAndScrape(t)
	used := map[string][]string{} // metric -> where
	for _, q := range queries {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		for _, n := range names {
			used[n] = append(used[n], q.where)
		}
	}
	for n, where := range used {
		if !exposed[n] {
			t.Errorf("metric %s is not exposed by a gateway or a runner; used by %s", n, strings.Join(where, "; "))
		}
	}
	// The runner's series are in the dashboard and the alerts: the test saw
	// both processes, not only the gateway.
	for _, n := range []string{"tether_gateway_queue_drops_total", "tether_runner_claims_total", "tether_maintenance_actions_total"} {
		if len(used[n]) == 0 {
			t.Errorf("%s is used by no panel or alert", n)
		}
	}
}

// dashboardQueries checks the dashboard's shape (importable in Grafana 10
// and 11: its schema, the datasource input every panel uses) and returns
// its panels' and variables' queries.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Datasource struct{ UID string }
	}
	type panel struct {
		ID         int
		Type       string
		Title      string
		Datasource *struct{ UID string }
		Targets    []target
		Panels     []json.RawMessage
	}
	var d struct {
		Inputs        []struct{ Name, Type, PluginID string } `json:"__inputs"`
		SchemaVersion int
		UID, Title    string
		Panels        []panel
		Templating    struct {
			List []struct {
				Name, Type string
				Query      struct{ Query string }
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.SchemaVersion < 39 || d.UID == "" || d.Title == "" {
		t.Errorf("dashboard schemaVersion %d, uid %q, title %q", d.SchemaVersion, d.UID, d.Title)
	}
	if !slices.ContainsFunc(d.Inputs, func(in struct{ Name, Type, PluginID string }) bool {
		return in.Name == "DS_PROMETHEUS" && in.Type == "datasource" && in.PluginID == "prometheus"
	}) {
		t.Errorf("dashboard has no DS_PROMETHEUS datasource input: %+v", d.Inputs)
	}
	const ds = "${DS_PROMETHEUS}"
	var qs []query
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != ds || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %v, %d targets; want %s and a query", p.Title, p.Datasource, len(p.Targets), ds)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != ds || tg.Expr == "" {
				t.Errorf("panel %q target %s: datasource %q, expr %q", p.Title, tg.RefID, tg.Datasource.UID, tg.Expr)
			}
			qs = append(qs, query{where: fmt.Sprintf("panel %q", p.Title), expr: tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		// label_values(metric, label): the metric is the selector before the comma.
		sel, ok := strings.CutPrefix(v.Query.Query, "label_values(")
		if sel, _, found := strings.Cut(sel, ","); ok && found {
			qs = append(qs, query{where: "variable $" + v.Name, expr: sel})
		} else {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, v.Query.Query)
		}
	}
	if len(qs) < 20 {
		t.Errorf("only %d queries in the dashboard", len(qs))
	}
	return qs
}

// alertQueries checks the rule file's shape (Prometheus's groups format,
// the three alerts docs/deploy.md describes, each with a for, a severity and
// annotations saying what to do) and returns the rules' expressions. The
// file is YAML in its JSON form, so encoding/json reads all of it once its
// leading YAML comments are skipped.
func alertQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(line, "#") {
			body = append(body, line)
		}
	}
	type rule struct {
		Alert, Expr, For string
		Labels           map[string]string
		Annotations      map[string]string
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []rule
		}
	}
	dec := json.NewDecoder(strings.NewReader(strings.Join(body, "")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var qs []query
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if d, err := model.ParseDuration(r.For); err != nil || time.Duration(d) < time.Minute {
				t.Errorf("alert %s: for %q (%v); want a duration of a minute or more", r.Alert, r.For, err)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, a)
				}
			}
			qs = append(qs, query{where: "alert " + r.Alert, expr: r.Expr})
		}
	}
	slices.Sort(names)
	if want := []string{"TetherNoRunnerClaiming", "TetherResumesFailing", "TetherTabQueuesClosing1013"}; !slices.Equal(names, want) {
		t.Errorf("alerts %v, want %v", names, want)
	}
	return qs
}

// trafficAndScrape runs a gateway and a runner, makes the traffic that
// creates the labelled series the queries use (a submit run to its end, an
// answer unavailable), and returns the names of every series both expose
// as Prometheus scrapes them (a histogram's family also as its _bucket,
// _sum and _count series).
func trafficAndScrape(t *testing.T) map[string]bool {
	t.Helper()
	e := setup(t, func(o *envOptions) {
		o.noRunner = true
		o.wrapStore = func(_ *env, s task.Store) task.Store { return unavailableConversations{s} }
	})
	eng, _ := engine.New("demo")
	r, err := runner.New(runner.Config{Engine: eng, Logger: quietLogger()}, e.store, natsrunner.New(e.bus))
	if err != nil {
		t.Fatalf("runner: %v", err)
	}
	// As cmd/runner does: the maintenance loop's series on the runner's /metrics.
	if _, err := maintenance.NewMetrics(r.Registerer()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	tb := e.dial("dash")
	taskID := newID()
	if f := tb.submit(taskID, newID(), "/stream 3 0"); f.Type != "submitted" {
		t.Fatalf("submit: %s", f.raw)
	}
	f := follower{taskID: taskID}
	for !f.apply(tb.next()) {
	}
	if f.status != "done" {
		t.Fatalf("task ended %s", f.status)
	}
	if code, _ := e.httpDo("GET", "/v1/conversations", "dash", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/conversations with Postgres away: %d, want 503", code)
	}

	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	exposed := map[string]bool{}
	addFamilies(t, exposed, resp.Body)
	rec := httptest.NewRecorder()
	r.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	addFamilies(t, exposed, rec.Body)
	for _, n := range []string{"tether_gateway_unavailable_total", "tether_gateway_submits_total", "tether_runner_claims_total"} {
		if !exposed[n] {
			t.Fatalf("the traffic did not make %s appear", n)
		}
	}
	return exposed
}

func addFamilies(t *testing.T, exposed map[string]bool, body io.Reader) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	for name, f := range fams {
		exposed[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			exposed[name+"_bucket"], exposed[name+"_sum"], exposed[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			exposed[name+"_sum"], exposed[name+"_count"] = true, true
		}
	}
}

// unavailableConversations answers the conversation list as if Postgres
// were down.
type unavailableConversations struct{ task.Store }

func (unavailableConversations) Conversations(context.Context, string, task.Page) ([]task.Conversation, string, error) {
	return nil, "", task.Unavailable("database", fmt.Errorf("connection refused"))
}

var (
	promString     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers   = regexp.MustCompile(`\{[^{}]*\}`)
	promRange      = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGrouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promIdentifier = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	// promKeywords are PromQL's words that are neither functions nor metrics
	// (grouping words are removed with their label lists before).
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true}
)

// metricNames returns the metric names an expression selects: identifiers
// that are not in a string, a label matcher, a range or a grouping clause,
// not a function (followed by "("), not a keyword, and not part of a number
// (1e-9) or of a Grafana variable ($__rate_interval). It refuses an
// expression whose brackets do not balance, which would fool the rest.
func metricNames(expr string) ([]string, error) {
	s := promString.ReplaceAllString(expr, `""`)
	depth := map[rune]int{}
	for _, c := range s {
		switch c {
		case '(', '{', '[':
			depth[c]++
		case ')':
			depth['(']--
		case '}':
			depth['{']--
		case ']':
			depth['[']--
		}
	}
	if depth['('] != 0 || depth['{'] != 0 || depth['['] != 0 {
		return nil, fmt.Errorf("unbalanced brackets in %q", expr)
	}
	s = promMatchers.ReplaceAllString(s, "{}")
	s = promRange.ReplaceAllString(s, "[]")
	s = promGrouping.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promIdentifier.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(s[loc[0]-1:loc[0]], "0123456789.$") {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") || promKeywords[name] {
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no metric in %q", expr)
	}
	return names, nil
}

// TestMetricNames: the extraction the dashboard test relies on finds the
// metrics and only them.
func TestMetricNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (outcome) (rate(tether_gateway_submits_total{outcome=~"created|retried"}[$__rate_interval]))`,
			[]string{"tether_gateway_submits_total"}},
		{`a_total > 0 unless on () sum(increase(b_total{x="y"}[10m])) > 0`, []string{"a_total", "b_total"}},
		{`sum(rate(c[5m])) / clamp_min(sum without (instance) (rate(d[5m])), 1e-9) * 60`, []string{"c", "d"}},
		{`(sum(rate(e{operation=~"ws subscribe|sse"}[10m])) or vector(0)) and on() f offset 5m`, []string{"e", "f"}},
		{`histogram_quantile(0.99, sum by (le) (rate(g_bucket[5m])))`, []string{"g_bucket"}},
		{`go_goroutines{job=~"$job"}`, []string{"go_goroutines"}},
	} {
		got, err := metricNames(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %v, %v; want %v", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`sum(rate(x[5m])`, `vector(1)`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q) = %v, want an error", bad, got)
		}
	}
}
