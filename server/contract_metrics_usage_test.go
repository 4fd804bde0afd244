package server_test

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// scrape reads /metrics through the validating client and parses it.
func scrape(t *testing.T, c *client.ClientWithResponses) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := c.GetMetricsWithResponse(bg)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK || !strings.HasPrefix(res.HTTPResponse.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics = %d %s %s", res.StatusCode(), res.HTTPResponse.Header.Get("Content-Type"), res.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(res.Body))
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	return mfs
}

// value sums the counter, or the histogram count (sum when sum is true),
// of the series of name matching every label.
func value(mfs map[string]*dto.MetricFamily, name string, sum bool, labels map[string]string) float64 {
	mf := mfs[name]
	if mf == nil {
		return 0
	}
	total := 0.0
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Histogram != nil && sum:
			total += m.GetHistogram().GetSampleSum()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

func TestMetrics(t *testing.T) {
	up := newTokenUpstream(t)
	env := servertest.New(t, withLimits(4, 0), withControlLimit(4), withTokenUpstream(up))
	admin := env.Client(t)
	public := env.ClientWithKey(t, "")
	before := scrape(t, public)

	key := createKey(t, admin, "llm", []client.Scope{client.ScopeLLM}, nil).Key
	if res, err := env.ClientWithKey(t, key).ChatWithResponse(bg, client.ChatRequest{
		Model: "fake/m", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "hi"}},
	}); err != nil || res.StatusCode() != http.StatusOK {
		t.Fatalf("chat = %v %v", res, err)
	}
	for range 6 { // 3 left after the creation: 3 refusals
		if _, err := admin.ListAPIKeysWithResponse(bg, nil); err != nil {
			t.Fatal(err)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, env.URL+"/v1/no/such/route", nil)
	if res, err := env.HTTPClient(t).Do(req); err != nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown route = %v %v", res, err)
	}
	after := scrape(t, public)

	delta := func(name string, sum bool, labels map[string]string) float64 {
		return value(after, name, sum, labels) - value(before, name, sum, labels)
	}
	tests := []struct {
		name   string
		metric string
		sum    bool
		labels map[string]string
		want   float64
	}{
		{"requests by route and status", "http_server_request_duration_seconds", false,
			map[string]string{"http_request_method": "GET", "http_route": "/v1/api-keys", "http_response_status_code": "429"}, 3},
		{"created key", "http_server_request_duration_seconds", false,
			map[string]string{"http_request_method": "POST", "http_route": "/v1/api-keys", "http_response_status_code": "201"}, 1},
		{"unmatched paths share one label", "http_server_request_duration_seconds", false,
			map[string]string{"http_route": "other", "http_response_status_code": "404"}, 1},
		{"rate-limit refusals", "switchboard_rate_limit_refusals_total", false,
			map[string]string{"limit": "control_requests", "credential_kind": "api_key"}, 3},
		{"upstream latency by provider", "gen_ai_client_operation_duration_seconds", false,
			map[string]string{"gen_ai_system": "fake", "gen_ai_request_model": "m", "gen_ai_operation_name": "chat", "error_type": ""}, 1},
		{"input tokens", "gen_ai_client_token_usage", true,
			map[string]string{"gen_ai_system": "fake", "gen_ai_request_model": "m", "gen_ai_token_type": "input"}, 10},
		{"output tokens", "gen_ai_client_token_usage", true,
			map[string]string{"gen_ai_system": "fake", "gen_ai_request_model": "m", "gen_ai_token_type": "output"}, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := delta(tc.metric, tc.sum, tc.labels); got != tc.want {
				t.Errorf("%s%v grew by %v, want %v", tc.metric, tc.labels, got, tc.want)
			}
		})
	}
	if after["go_goroutines"] == nil {
		t.Error("the Go runtime collector is missing")
	}
}

func TestMetricsRequireScope(t *testing.T) {
	env := servertest.New(t, func(c *config.Config) { c.Metrics.RequireScope = "admin" })
	llmKey := createKey(t, env.Client(t), "llm", []client.Scope{client.ScopeLLM}, nil).Key
	tests := []struct {
		name   string
		key    string
		status int
	}{
		{"no credential", "", http.StatusUnauthorized},
		{"without the scope", llmKey, http.StatusForbidden},
		{"wrong credential", "sb_" + strings.Repeat("x", 43), http.StatusUnauthorized},
		{"admin", env.AdminKey, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := env.ClientWithKey(t, tc.key).GetMetricsWithResponse(bg)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode() != tc.status {
				t.Fatalf("= %d %s, want %d", res.StatusCode(), res.Body, tc.status)
			}
		})
	}
}

func TestContractUsage(t *testing.T) {
	up := newTokenUpstream(t)
	env := servertest.New(t, withTokenUpstream(up), func(c *config.Config) {
		c.Providers[len(c.Providers)-1].Models[0].Pricing = &config.Pricing{Input: 1, Output: 2}
	})
	admin := env.Client(t)
	a := createKey(t, admin, "a", []client.Scope{client.ScopeLLM}, nil)
	b := createKey(t, admin, "b", []client.Scope{client.ScopeLLM}, nil)
	chat := func(key string, n int) {
		for range n {
			res, err := env.ClientWithKey(t, key).ChatWithResponse(bg, client.ChatRequest{
				Model: "fake/m", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "hi"}},
			})
			if err != nil || res.StatusCode() != http.StatusOK {
				t.Fatalf("chat = %v %v", res, err)
			}
		}
	}
	chat(a.Key, 2)
	chat(b.Key, 1)
	// A call by an OAuth client is accounted to the client.
	oc := createOAuthClient(t, admin, "svc", []client.Scope{client.ScopeLLM}, nil)
	chat(issueToken(t, env, oc.Id, oc.ClientSecret, nil).AccessToken, 1)

	groupBy := func(gs ...client.UsageGroupBy) *[]client.UsageGroupBy { return &gs }
	const perCall = (10*1 + 20*2) / 1e6 // USD per million tokens
	tests := []struct {
		name      string
		key       string
		params    client.GetUsageParams
		want      []usageRow
		wantTotal int64
	}{
		{"admin by key", env.AdminKey, client.GetUsageParams{GroupBy: groupBy(client.UsageGroupByKey)},
			sortedRows(usageRow{a.Id, 2}, usageRow{b.Id, 1}, usageRow{oc.Id, 1}), 4},
		{"admin filtered to one key", env.AdminKey, client.GetUsageParams{GroupBy: groupBy(client.UsageGroupByKey), Key: &b.Id},
			[]usageRow{{b.Id, 1}}, 1},
		{"a key sees only itself", a.Key, client.GetUsageParams{GroupBy: groupBy(client.UsageGroupByKey, client.UsageGroupByModel)},
			[]usageRow{{a.Id, 2}}, 2},
		{"a key may name itself", a.Key, client.GetUsageParams{GroupBy: groupBy(client.UsageGroupByKey), Key: &a.Id},
			[]usageRow{{a.Id, 2}}, 2},
		{"by model, default grouping", env.AdminKey, client.GetUsageParams{}, []usageRow{{"", 4}}, 4},
		{"a window before any usage", env.AdminKey, client.GetUsageParams{From: ptr(time.Now().Add(-48 * time.Hour)), To: ptr(time.Now().Add(-24 * time.Hour))}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := env.ClientWithKey(t, tc.key).GetUsageWithResponse(bg, &tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode() != http.StatusOK {
				t.Fatalf("= %d %s", res.StatusCode(), res.Body)
			}
			var got []usageRow
			for _, r := range res.JSON200.Data {
				k := ""
				if r.Key != nil {
					k = *r.Key
				}
				got = append(got, usageRow{k, r.Requests})
				if r.TotalTokens != r.Requests*30 || r.PromptTokens != r.Requests*10 || math.Abs(r.CostUsd-float64(r.Requests)*perCall) > 1e-12 {
					t.Errorf("row %+v: tokens or cost wrong", r)
				}
				if tc.params.GroupBy == nil && (r.Model == nil || *r.Model != "fake/m") {
					t.Errorf("row %+v lacks the model", r)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("rows %v, want %v (%s)", got, tc.want, res.Body)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("rows %v, want %v", got, tc.want)
				}
			}
			if res.JSON200.Total.Requests != tc.wantTotal {
				t.Errorf("total = %+v, want %d requests", res.JSON200.Total, tc.wantTotal)
			}
		})
	}

	t.Run("by day", func(t *testing.T) {
		res, err := admin.GetUsageWithResponse(bg, &client.GetUsageParams{GroupBy: groupBy(client.UsageGroupByDay)})
		if err != nil {
			t.Fatal(err)
		}
		d := res.JSON200.Data
		today := time.Now().UTC().Truncate(24 * time.Hour)
		if res.StatusCode() != http.StatusOK || len(d) != 1 || d[0].Period == nil || !d[0].Period.Equal(today) || d[0].Requests != 4 {
			t.Fatalf("= %d %s", res.StatusCode(), res.Body)
		}
	})
	t.Run("another key's usage is forbidden", func(t *testing.T) {
		res, err := env.ClientWithKey(t, a.Key).GetUsageWithResponse(bg, &client.GetUsageParams{Key: &b.Id})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != http.StatusForbidden {
			t.Fatalf("= %d %s, want 403", res.StatusCode(), res.Body)
		}
	})
	t.Run("to before from", func(t *testing.T) {
		now := time.Now()
		res, err := admin.GetUsageWithResponse(bg, &client.GetUsageParams{From: ptr(now), To: ptr(now.Add(-2 * time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != http.StatusUnprocessableEntity {
			t.Fatalf("= %d %s, want 422", res.StatusCode(), res.Body)
		}
	})
}

// usageRow is the part of a usage row the tests compare.
type usageRow struct {
	key      string
	requests int64
}

// sortedRows orders rows by key as the API does.
func sortedRows(rs ...usageRow) []usageRow {
	slices.SortFunc(rs, func(a, b usageRow) int { return strings.Compare(a.key, b.key) })
	return rs
}
