package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// TestContractErrors_ProblemsAreCapped: 60,000 unknown params used to
// answer a 4.8 MB 400; the list stops at errs.MaxProblems and says how many
// more there were.
func TestContractErrors_ProblemsAreCapped(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createConnector(t, c, weatherConnector("weather"))
	createAction(t, c, "weather", forecastAction("forecast"))
	if res, err := c.CreateConnectionWithResponse(bg, "weather", client.ConnectionInput{ApiKey: ptr("k")}); err != nil || res.JSON201 == nil {
		t.Fatalf("connection: %v %s", err, res.Body)
	}
	const unknown = 60000
	var b strings.Builder
	b.WriteString(`{"action":"forecast","params":{"city":"Paris"`)
	for i := range unknown {
		fmt.Fprintf(&b, `,"x%d":1`, i)
	}
	b.WriteString(`}}`)
	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey))
	res, err := raw.Post(env.URL+"/v1/integrations/weather/run", "application/json", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d: %.300s", res.StatusCode, body)
	}
	if len(body) > 16<<10 {
		t.Fatalf("error body is %d bytes for a %d-byte request, want at most 16 KiB", len(body), b.Len())
	}
	e := decodeError(t, body)
	ps, _ := e.Details["problems"].([]any)
	if len(ps) != errs.MaxProblems || e.Details["problemsOmitted"] != float64(unknown-errs.MaxProblems) {
		t.Fatalf("%d problems listed, problemsOmitted %v; want %d and %d", len(ps), e.Details["problemsOmitted"], errs.MaxProblems, unknown-errs.MaxProblems)
	}
	if want := fmt.Sprintf("and %d more", unknown-errs.MaxProblems); !strings.Contains(e.Message, want) {
		t.Fatalf("message %q does not say %q", e.Message, want)
	}
}
