package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks/webhooktest"
)

var whCtx = context.Background()

func createWebhook(t *testing.T, c *client.ClientWithResponses, in client.WebhookCreate) *client.WebhookWithSecret {
	t.Helper()
	res, err := c.CreateWebhookWithResponse(whCtx, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated || res.JSON201 == nil {
		t.Fatalf("create webhook = %d %s, want 201", res.StatusCode(), res.Body)
	}
	return res.JSON201
}

func createKeys(t *testing.T, c *client.ClientWithResponses, n int, prefix string) {
	t.Helper()
	for i := range n {
		createKey(t, c, prefix+"-"+strconv.Itoa(i), []client.Scope{client.ScopeLLM}, nil)
	}
}

func whStatus(t *testing.T, what string, got, want int, body []byte) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %d %s, want %d", what, got, body, want)
	}
}

func whErrorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Error.Code
}

func whIfMatch(tag string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("If-Match", tag)
		return nil
	}
}

// TestContractWebhookLifecycle: create (secret shown once, generated in
// Standard Webhooks format), read, list, replace with If-Match, rotate,
// delete; the secret never appears again.
func TestContractWebhookLifecycle(t *testing.T) {
	env := servertest.New(t, webhooktest.FastConfig(3, 10*time.Millisecond))
	c := env.Client(t)

	res, err := c.CreateWebhookWithResponse(whCtx, client.WebhookCreate{
		Url: "https://hooks.example.com/a", Events: []string{"connector.created", "api_key.created"}, Description: whPtr("billing"),
	})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "create", res.StatusCode(), http.StatusCreated, res.Body)
	w := res.JSON201
	if got := res.HTTPResponse.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q", got)
	}
	if got := res.HTTPResponse.Header.Get("ETag"); got != `"1"` {
		t.Errorf("ETag = %q", got)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(w.Secret, "whsec_"))
	if !strings.HasPrefix(w.Secret, "whsec_") || err != nil || len(key) < 24 || len(key) > 64 {
		t.Errorf("generated secret %q is not whsec_ + base64 of 24-64 bytes", w.Secret)
	}
	if !w.Enabled || w.Version != 1 || !strings.HasPrefix(w.Id, "wh_") || *w.Description != "billing" || w.CreatedAt.Location() != time.UTC {
		t.Errorf("created = %s", res.Body)
	}
	secret := w.Secret

	// A given secret is used as is.
	mine := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32))
	w2 := createWebhook(t, c, client.WebhookCreate{Url: "https://hooks.example.com/b", Events: []string{"*"}, Secret: &mine, Enabled: whPtr(false)})
	if w2.Secret != mine || w2.Enabled {
		t.Errorf("second webhook: secret or enabled not as given")
	}

	get, err := c.GetWebhookWithResponse(whCtx, w.Id)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "get", get.StatusCode(), http.StatusOK, get.Body)
	if get.HTTPResponse.Header.Get("ETag") != `"1"` || get.JSON200.Url != "https://hooks.example.com/a" {
		t.Errorf("get = %s", get.Body)
	}

	list, err := c.ListWebhooksWithResponse(whCtx, &client.ListWebhooksParams{Limit: whPtr(1)})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "list", list.StatusCode(), http.StatusOK, list.Body)
	if len(list.JSON200.Data) != 1 || list.JSON200.NextCursor == nil || list.JSON200.Data[0].Id != w.Id {
		t.Fatalf("list page 1 = %s", list.Body)
	}
	list2, err := c.ListWebhooksWithResponse(whCtx, &client.ListWebhooksParams{Limit: whPtr(1), Cursor: list.JSON200.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(list2.JSON200.Data) != 1 || list2.JSON200.NextCursor != nil || list2.JSON200.Data[0].Id != w2.Id {
		t.Fatalf("list page 2 = %s", list2.Body)
	}
	for _, b := range [][]byte{get.Body, list.Body, list2.Body} {
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(mine)) || bytes.Contains(b, []byte("secret\"")) {
			t.Errorf("a read shows the secret: %s", b)
		}
	}

	replace := client.WebhookReplace{Url: "https://hooks.example.com/c", Events: []string{"*", "action.failed"}, Enabled: whPtr(true)}
	stale, err := c.ReplaceWebhookWithResponse(whCtx, w.Id, &client.ReplaceWebhookParams{}, replace, whIfMatch(`"7"`))
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "replace with a stale If-Match", stale.StatusCode(), http.StatusPreconditionFailed, stale.Body)
	rep, err := c.ReplaceWebhookWithResponse(whCtx, w.Id, &client.ReplaceWebhookParams{}, replace, whIfMatch(`"1"`))
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "replace", rep.StatusCode(), http.StatusOK, rep.Body)
	if rep.JSON200.Version != 2 || rep.HTTPResponse.Header.Get("ETag") != `"2"` || rep.JSON200.Url != replace.Url ||
		!slices.Equal(rep.JSON200.Events, replace.Events) || rep.JSON200.Description != nil || rep.JSON200.PreviousSecretExpiresAt != nil {
		t.Errorf("replaced = %s", rep.Body)
	}

	// PUT with the same secret keeps it (no rotation); a new one rotates it.
	same := replace
	same.Secret = &secret
	rep, err = c.ReplaceWebhookWithResponse(whCtx, w.Id, nil, same)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "replace with the same secret", rep.StatusCode(), http.StatusOK, rep.Body)
	if rep.JSON200.PreviousSecretExpiresAt != nil {
		t.Errorf("same secret started a rotation: %s", rep.Body)
	}
	other := replace
	other.Secret = whPtr("whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 24)))
	rep, err = c.ReplaceWebhookWithResponse(whCtx, w.Id, nil, other)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "replace with a new secret", rep.StatusCode(), http.StatusOK, rep.Body)
	if p := rep.JSON200.PreviousSecretExpiresAt; p == nil || p.Sub(time.Now()) < 23*time.Hour || bytes.Contains(rep.Body, []byte("whsec_")) {
		t.Errorf("new secret via PUT: want a 24h grace period and no secret in the body: %s", rep.Body)
	}

	rot, err := c.RotateWebhookSecretWithResponse(whCtx, w.Id, nil, client.WebhookSecretRotation{GracePeriodSeconds: whPtr(60)})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "rotate", rot.StatusCode(), http.StatusOK, rot.Body)
	if !strings.HasPrefix(rot.JSON200.Secret, "whsec_") || rot.JSON200.Secret == secret || rot.HTTPResponse.Header.Get("Cache-Control") != "no-store" ||
		rot.JSON200.PreviousSecretExpiresAt == nil || time.Until(*rot.JSON200.PreviousSecretExpiresAt) > time.Minute {
		t.Errorf("rotate = %s", rot.Body)
	}
	again, err := c.RotateWebhookSecretWithResponse(whCtx, w.Id, nil, client.WebhookSecretRotation{Secret: &rot.JSON200.Secret})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "rotate to the current secret", again.StatusCode(), http.StatusUnprocessableEntity, again.Body)

	del, err := c.DeleteWebhookWithResponse(whCtx, w.Id, nil, whIfMatch(`"1"`))
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "delete with a stale If-Match", del.StatusCode(), http.StatusPreconditionFailed, del.Body)
	cur, _ := c.GetWebhookWithResponse(whCtx, w.Id)
	del, err = c.DeleteWebhookWithResponse(whCtx, w.Id, nil, whIfMatch(cur.HTTPResponse.Header.Get("ETag")))
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "delete", del.StatusCode(), http.StatusNoContent, del.Body)
	gone, err := c.GetWebhookWithResponse(whCtx, w.Id)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "get deleted", gone.StatusCode(), http.StatusNotFound, gone.Body)
	for _, id := range []string{w.Id, "nope"} {
		r, err := c.RotateWebhookSecretWithResponse(whCtx, id, nil, client.WebhookSecretRotation{})
		if err != nil {
			t.Fatal(err)
		}
		whStatus(t, "rotate missing", r.StatusCode(), http.StatusNotFound, r.Body)
	}

	// Secrets are sealed by the vault: the database never holds them.
	db := env.StoredBytes(t)
	for _, sec := range []string{secret, mine, rot.JSON200.Secret} {
		if bytes.Contains(db, []byte(strings.TrimPrefix(sec, "whsec_"))) {
			t.Errorf("the database holds a webhook secret in clear")
		}
	}
}

// TestContractWebhookValidation: every bad input is a 422 naming its field;
// nothing is stored.
func TestContractWebhookValidation(t *testing.T) {
	env := servertest.New(t, webhooktest.FastConfig(3, 10*time.Millisecond))
	c := env.Client(t)
	short := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 23))
	tests := []struct {
		name  string
		in    client.WebhookCreate
		field string
		want  string
	}{
		{"unknown event type", client.WebhookCreate{Url: "https://h.example/x", Events: []string{"connector.exploded"}}, "events[0]", "unknown event type"},
		{"no events", client.WebhookCreate{Url: "https://h.example/x", Events: []string{}}, "events", "at least one"},
		{"duplicate event", client.WebhookCreate{Url: "https://h.example/x", Events: []string{"*", "*"}}, "events[1]", "duplicate"},
		{"ftp url", client.WebhookCreate{Url: "ftp://h.example/x", Events: []string{"*"}}, "url", "http or https"},
		{"relative url", client.WebhookCreate{Url: "/hooks", Events: []string{"*"}}, "url", "http or https"},
		{"credentials in url", client.WebhookCreate{Url: "https://u:p@h.example/x", Events: []string{"*"}}, "url", "credentials"},
		{"fragment", client.WebhookCreate{Url: "https://h.example/x#y", Events: []string{"*"}}, "url", "fragment"},
		{"metadata address", client.WebhookCreate{Url: "http://169.254.169.254/latest", Events: []string{"*"}}, "url", "egress denied"},
		{"private address", client.WebhookCreate{Url: "http://10.1.2.3/x", Events: []string{"*"}}, "url", "egress denied"},
		{"short secret", client.WebhookCreate{Url: "https://h.example/x", Events: []string{"*"}, Secret: &short}, "secret", "24 to 64 bytes"},
	}
	// Some inputs break the spec too (minItems, uniqueItems): the server
	// must refuse them by itself.
	loose, err := client.NewClientWithResponses(env.URL, client.WithHTTPClient(env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := loose.CreateWebhookWithResponse(whCtx, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			whStatus(t, "create", res.StatusCode(), http.StatusUnprocessableEntity, res.Body)
			if !bytes.Contains(res.Body, []byte(`"field":"`+tt.field+`"`)) || !bytes.Contains(res.Body, []byte(tt.want)) {
				t.Errorf("body %s does not name %s with %q", res.Body, tt.field, tt.want)
			}
		})
	}
	list, err := c.ListWebhooksWithResponse(whCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.JSON200.Data) != 0 {
		t.Errorf("invalid webhooks were stored: %s", list.Body)
	}
	// Spec-level violations are refused too (strict decoding, 400).
	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/v1/webhooks", strings.NewReader(`{"url":"https://h.example/x","events":["*"],"secrett":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := raw.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown field = %d, want 400", resp.StatusCode)
	}
	// Scope: webhooks:write is needed to read as well as write.
	llmKey := createKey(t, c, "llm-only", []client.Scope{client.ScopeLLM}, nil)
	other := env.ClientWithKey(t, llmKey.Key)
	forb, err := other.ListWebhooksWithResponse(whCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "list without webhooks:write", forb.StatusCode(), http.StatusForbidden, forb.Body)
	evs, err := other.ListEventsWithResponse(whCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "events without webhooks:write", evs.StatusCode(), http.StatusForbidden, evs.Body)
	whKey := createKey(t, c, "hooks", []client.Scope{client.ScopeWebhooksWrite}, nil)
	ok, err := env.ClientWithKey(t, whKey.Key).ListEventsWithResponse(whCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "events with webhooks:write", ok.StatusCode(), http.StatusOK, ok.Body)
}

// TestContractWebhookDeliveryVerified: events caused through the API reach a
// real receiver, every signature verified by the independent Standard
// Webhooks library; the delivered body is exactly the stored event; the
// delivery log, the event log (both orders, type filter, paging), the test
// endpoint and manual redelivery work.
func TestContractWebhookDeliveryVerified(t *testing.T) {
	env := servertest.New(t, webhooktest.FastConfig(3, 10*time.Millisecond))
	c := env.Client(t)
	rcv := webhooktest.New(t)
	w := createWebhook(t, c, client.WebhookCreate{Url: rcv.URL(), Events: []string{"*"}})
	rcv.Expect(w.Secret)

	createKeys(t, c, 5, "app")
	k := createKey(t, c, "doomed", []client.Scope{client.ScopeLLM}, nil)
	del, err := c.DeleteAPIKeyWithResponse(whCtx, k.Id)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "revoke", del.StatusCode(), http.StatusNoContent, del.Body)
	test, err := c.TestWebhookWithResponse(whCtx, w.Id)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "test", test.StatusCode(), http.StatusAccepted, test.Body)
	if test.JSON202.Status != client.WebhookDeliveryPending || test.JSON202.EventType != "webhook.test" {
		t.Errorf("test delivery = %s", test.Body)
	}
	webhooktest.WaitFor(t, "8 deliveries", 30*time.Second, func() bool { return len(rcv.Delivered()) == 8 })
	rcv.CheckClean(t)
	// Outcomes are recorded once per batch, right after it.
	webhooktest.WaitFor(t, "the outcomes to be recorded", 30*time.Second, func() bool {
		p, err := c.ListWebhookDeliveriesWithResponse(whCtx, w.Id, &client.ListWebhookDeliveriesParams{Status: whPtr(client.WebhookDeliveryPending)})
		return err == nil && p.JSON200 != nil && len(p.JSON200.Data) == 0
	})

	// Order of creation; the bodies are the stored events, byte for byte.
	got := rcv.Received()
	var types []string
	for _, g := range got {
		types = append(types, g.Event.Type)
		ev, err := c.GetEventWithResponse(whCtx, g.ID)
		if err != nil {
			t.Fatal(err)
		}
		whStatus(t, "get event", ev.StatusCode(), http.StatusOK, ev.Body)
		if !bytes.Equal(bytes.TrimSpace(ev.Body), g.Body) {
			t.Errorf("delivered body differs from GET /v1/events/%s:\n%s\n%s", g.ID, g.Body, ev.Body)
		}
	}
	want := []string{"api_key.created", "api_key.created", "api_key.created", "api_key.created", "api_key.created", "api_key.created", "api_key.revoked", "webhook.test"}
	if !slices.Equal(types, want) {
		t.Errorf("delivered in order %v, want %v", types, want)
	}
	if bytes.Contains(got[7].Body, []byte(w.Secret)) || !bytes.Contains(got[7].Body, []byte(w.Id)) {
		t.Errorf("webhook.test data = %s", got[7].Body)
	}
	if !bytes.Contains(got[6].Body, []byte(`"name":"doomed"`)) || bytes.Contains(got[6].Body, []byte(k.Key)) {
		t.Errorf("api_key.revoked data = %s", got[6].Body)
	}

	// The delivery log, newest first, with status filter and paging.
	dl, err := c.ListWebhookDeliveriesWithResponse(whCtx, w.Id, &client.ListWebhookDeliveriesParams{Limit: whPtr(5)})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "deliveries", dl.StatusCode(), http.StatusOK, dl.Body)
	if len(dl.JSON200.Data) != 5 || dl.JSON200.NextCursor == nil || dl.JSON200.Data[0].EventType != "webhook.test" {
		t.Fatalf("deliveries page 1 = %s", dl.Body)
	}
	for _, d := range dl.JSON200.Data {
		if d.Status != client.WebhookDeliverySucceeded || d.Attempts != 1 || d.LastResponseCode == nil || *d.LastResponseCode != 204 ||
			d.NextAttemptAt != nil || d.LastError != nil || d.LastAttemptAt == nil {
			t.Errorf("delivery = %+v", d)
		}
	}
	dl2, err := c.ListWebhookDeliveriesWithResponse(whCtx, w.Id, &client.ListWebhookDeliveriesParams{Limit: whPtr(5), Cursor: dl.JSON200.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(dl2.JSON200.Data) != 3 || dl2.JSON200.NextCursor != nil {
		t.Fatalf("deliveries page 2 = %s", dl2.Body)
	}
	pend, err := c.ListWebhookDeliveriesWithResponse(whCtx, w.Id, &client.ListWebhookDeliveriesParams{Status: whPtr(client.WebhookDeliveryPending)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pend.JSON200.Data) != 0 {
		t.Errorf("pending deliveries = %s", pend.Body)
	}

	// Manual redelivery of a succeeded delivery: same webhook-id again.
	first := dl2.JSON200.Data[2]
	re, err := c.RetryWebhookDeliveryWithResponse(whCtx, w.Id, first.Id)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "retry", re.StatusCode(), http.StatusAccepted, re.Body)
	if re.JSON202.Status != client.WebhookDeliveryPending {
		t.Errorf("retry = %s", re.Body)
	}
	webhooktest.WaitFor(t, "the redelivery", 30*time.Second, func() bool { return len(rcv.Received()) == 9 })
	if last := rcv.Received()[8]; last.ID != first.EventId {
		t.Errorf("redelivered webhook-id %s, want %s", last.ID, first.EventId)
	}
	webhooktest.WaitFor(t, "the redelivery to be recorded", 30*time.Second, func() bool {
		one, err := c.GetWebhookDeliveryWithResponse(whCtx, w.Id, first.Id)
		return err == nil && one.JSON200 != nil && one.JSON200.Status == client.WebhookDeliverySucceeded && one.JSON200.Attempts == 2
	})
	rcv.CheckClean(t)
	for _, id := range []string{"dlv_nope", strings.Replace(first.Id, "dlv_", "dlv_f", 1)} {
		nf, err := c.GetWebhookDeliveryWithResponse(whCtx, w.Id, id)
		if err != nil {
			t.Fatal(err)
		}
		whStatus(t, "get unknown delivery", nf.StatusCode(), http.StatusNotFound, nf.Body)
		rnf, err := c.RetryWebhookDeliveryWithResponse(whCtx, w.Id, id)
		if err != nil {
			t.Fatal(err)
		}
		whStatus(t, "retry unknown delivery", rnf.StatusCode(), http.StatusNotFound, rnf.Body)
	}

	// The event log: newest first by default, oldest first on request,
	// filtered by type, paged by cursor.
	evs, err := c.ListEventsWithResponse(whCtx, &client.ListEventsParams{Limit: whPtr(3)})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "events", evs.StatusCode(), http.StatusOK, evs.Body)
	if len(evs.JSON200.Data) != 3 || evs.JSON200.Data[0].Type != "webhook.test" || evs.JSON200.NextCursor == nil {
		t.Fatalf("events page 1 = %s", evs.Body)
	}
	var all []string
	params := &client.ListEventsParams{Order: whPtr(client.EventOrderOldest), Limit: whPtr(3)}
	for {
		page, err := c.ListEventsWithResponse(whCtx, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.JSON200.Data {
			all = append(all, e.Id)
		}
		if page.JSON200.NextCursor == nil {
			break
		}
		params.Cursor = page.JSON200.NextCursor
	}
	// The admin key of servertest was created before the webhook: its event
	// is in the log but was not delivered.
	if len(all) != 9 || !slices.IsSorted(all) {
		t.Errorf("oldest-first ids = %v", all)
	}
	for i, g := range got {
		if all[i+1] != g.ID {
			t.Errorf("event %d: log has %s, receiver got %s", i, all[i+1], g.ID)
		}
	}
	typ := client.EventTypeAPIKeyRevoked
	rev, err := c.ListEventsWithResponse(whCtx, &client.ListEventsParams{Type: &typ})
	if err != nil {
		t.Fatal(err)
	}
	if len(rev.JSON200.Data) != 1 || rev.JSON200.Data[0].Id != got[6].ID {
		t.Errorf("type filter = %s", rev.Body)
	}
	bad, err := c.ListEventsWithResponse(whCtx, &client.ListEventsParams{Cursor: whPtr("garbage")})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "bad cursor", bad.StatusCode(), http.StatusBadRequest, bad.Body)
	nf, err := c.GetEventWithResponse(whCtx, "evt_0000")
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "unknown event", nf.StatusCode(), http.StatusNotFound, nf.Body)
}

// TestWebhookSecretRotationSignsWithBoth: during the grace period every
// delivery verifies with the old and with the new secret (two signatures);
// after a rotation without grace, only with the new one.
func TestWebhookSecretRotationSignsWithBoth(t *testing.T) {
	env := servertest.New(t, webhooktest.FastConfig(3, 10*time.Millisecond))
	c := env.Client(t)
	rcv := webhooktest.New(t)
	w := createWebhook(t, c, client.WebhookCreate{Url: rcv.URL(), Events: []string{"api_key.created"}})
	old := w.Secret

	rot, err := c.RotateWebhookSecretWithResponse(whCtx, w.Id, nil, client.WebhookSecretRotation{})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "rotate", rot.StatusCode(), http.StatusOK, rot.Body)
	rcv.Expect(old, rot.JSON200.Secret)
	createKeys(t, c, 2, "during-grace")
	webhooktest.WaitFor(t, "2 deliveries", 30*time.Second, func() bool { return len(rcv.Delivered()) == 2 })
	for _, g := range rcv.Received() {
		if n := len(strings.Fields(g.Signature)); n != 2 {
			t.Errorf("webhook-signature has %d signatures during the grace period: %q", n, g.Signature)
		}
	}
	rcv.CheckClean(t)

	rot2, err := c.RotateWebhookSecretWithResponse(whCtx, w.Id, nil, client.WebhookSecretRotation{GracePeriodSeconds: whPtr(0)})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "rotate without grace", rot2.StatusCode(), http.StatusOK, rot2.Body)
	if rot2.JSON200.PreviousSecretExpiresAt != nil {
		t.Errorf("rotation without grace kept a previous secret: %s", rot2.Body)
	}
	rcv.Expect(rot2.JSON200.Secret)
	createKeys(t, c, 1, "after")
	webhooktest.WaitFor(t, "3 deliveries", 30*time.Second, func() bool { return len(rcv.Delivered()) == 3 })
	last := rcv.Received()[2]
	if n := len(strings.Fields(last.Signature)); n != 1 {
		t.Errorf("webhook-signature after a rotation without grace: %q", last.Signature)
	}
	rcv.CheckClean(t)
}

// TestWebhookDisabledAfterContinuousFailure: a receiver answering 500 for
// longer than webhooks.disableAfter gets its webhook disabled, visibly;
// test and retry then refuse with 409; enabling it again resumes the paused
// deliveries and clears the reason.
func TestWebhookDisabledAfterContinuousFailure(t *testing.T) {
	env := servertest.New(t, webhooktest.FastConfig(40, 20*time.Millisecond), func(c *config.Config) {
		c.Webhooks.DisableAfter = config.Duration(300 * time.Millisecond)
	})
	c := env.Client(t)
	rcv := webhooktest.New(t)
	rcv.SetFail(true)
	w := createWebhook(t, c, client.WebhookCreate{Url: rcv.URL(), Events: []string{"*"}})
	rcv.Expect(w.Secret)
	createKeys(t, c, 3, "k")

	var disabled *client.Webhook
	webhooktest.WaitFor(t, "the webhook to be disabled", 30*time.Second, func() bool {
		g, err := c.GetWebhookWithResponse(whCtx, w.Id)
		if err != nil || g.JSON200 == nil {
			return false
		}
		disabled = g.JSON200
		return !g.JSON200.Enabled
	})
	if disabled.DisabledAt == nil || disabled.DisabledReason == nil || !strings.Contains(*disabled.DisabledReason, "failed continuously") ||
		!strings.Contains(*disabled.DisabledReason, "500") || disabled.FailingSince == nil || disabled.Version != 2 {
		t.Errorf("disabled webhook = %+v", disabled)
	}
	dl, err := c.ListWebhookDeliveriesWithResponse(whCtx, w.Id, &client.ListWebhookDeliveriesParams{Status: whPtr(client.WebhookDeliveryPending)})
	if err != nil {
		t.Fatal(err)
	}
	if len(dl.JSON200.Data) != 3 {
		t.Fatalf("pending deliveries of the disabled webhook = %s", dl.Body)
	}
	head := dl.JSON200.Data[2]
	if head.Attempts < 2 || head.LastResponseCode == nil || *head.LastResponseCode != 500 || head.LastError == nil {
		t.Errorf("head delivery = %+v", head)
	}
	for _, d := range dl.JSON200.Data[:2] {
		if d.Attempts != 0 {
			t.Errorf("a later delivery was attempted before the first: %+v", d)
		}
	}
	tr, err := c.TestWebhookWithResponse(whCtx, w.Id)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "test a disabled webhook", tr.StatusCode(), http.StatusConflict, tr.Body)
	rr, err := c.RetryWebhookDeliveryWithResponse(whCtx, w.Id, head.Id)
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "retry on a disabled webhook", rr.StatusCode(), http.StatusConflict, rr.Body)
	// No new deliveries while disabled.
	createKeys(t, c, 1, "while-disabled")

	rcv.SetFail(false)
	rep, err := c.ReplaceWebhookWithResponse(whCtx, w.Id, nil, client.WebhookReplace{Url: rcv.URL(), Events: []string{"*"}, Enabled: whPtr(true)})
	if err != nil {
		t.Fatal(err)
	}
	whStatus(t, "re-enable", rep.StatusCode(), http.StatusOK, rep.Body)
	if !rep.JSON200.Enabled || rep.JSON200.DisabledReason != nil || rep.JSON200.DisabledAt != nil || rep.JSON200.FailingSince != nil {
		t.Errorf("re-enabled = %s", rep.Body)
	}
	webhooktest.WaitFor(t, "the paused deliveries", 30*time.Second, func() bool { return len(rcv.Delivered()) == 3 })
	rcv.CheckClean(t)
}

// TestWebhookFailureHidesURL: a delivery error names what went wrong but
// never the URL, which may carry a token.
func TestWebhookFailureHidesURL(t *testing.T) {
	env := servertest.New(t, webhooktest.FastConfig(1, 10*time.Millisecond))
	c := env.Client(t)
	rcv := webhooktest.New(t)
	rcv.Down()
	url := "http://" + rcv.Addr() + "/hooks?token=s3cr3t-t0ken"
	w := createWebhook(t, c, client.WebhookCreate{Url: url, Events: []string{"*"}})
	createKeys(t, c, 1, "k")
	var d client.WebhookDelivery
	webhooktest.WaitFor(t, "the delivery to fail", 30*time.Second, func() bool {
		dl, err := c.ListWebhookDeliveriesWithResponse(whCtx, w.Id, &client.ListWebhookDeliveriesParams{Status: whPtr(client.WebhookDeliveryFailed)})
		if err != nil || dl.JSON200 == nil || len(dl.JSON200.Data) == 0 {
			return false
		}
		d = dl.JSON200.Data[0]
		return true
	})
	if d.LastError == nil || !strings.Contains(*d.LastError, "refused") || strings.Contains(*d.LastError, "s3cr3t") || d.LastResponseCode != nil || d.Attempts < 1 {
		t.Errorf("failed delivery = %+v (lastError %q)", d, whDeref(d.LastError))
	}
}

func whDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func whPtr[T any](v T) *T { return &v }
