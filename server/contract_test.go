// Contract tests: the real server driven through clients that validate every
// request and response against server/openapi.yaml (servertest.Env.Client,
// ClientWithKey and HTTPClient), plus a check, after all tests of this
// package ran, that every operation of the spec was exercised by at least one
// validated exchange.
//
// Conventions for every engineer:
//   - Put the contract tests of a domain in server/contract_<domain>_test.go
//     (package server_test), e.g. contract_connectors_test.go,
//     contract_webhooks_test.go, contract_llm_test.go.
//   - Talk to the server only through env.Client(t) / env.ClientWithKey(t, key)
//     (generated client) or env.HTTPClient(t, servertest.WithKey(key)) for
//     routes registered by hand (SSE streams, model ids with "/") and for
//     hand-made requests. Requests that deliberately break the spec need
//     servertest.AllowInvalidRequests(); they do not count as coverage.
//   - Adding an operation to the spec without a test that exercises it makes
//     `go test ./server/` fail here, listing the operation.
//   - Error statuses an operation can answer must be declared on it
//     ($ref: "#/components/responses/ErrorResult"); an undeclared status, or
//     an error body that is not an ErrorResponse, fails the exchange.
//
// The coverage check runs only for a full run of the package: with -run,
// -skip or -list it cannot know which tests were meant to cover what.
package server_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && fullRun() {
		code = checkContractCoverage()
	}
	os.Exit(code)
}

// fullRun reports whether every test of the package was selected.
func fullRun() bool {
	for _, name := range []string{"test.run", "test.skip", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

func checkContractCoverage() int {
	ops, err := servertest.Operations()
	if err != nil {
		fmt.Fprintln(os.Stderr, "contract coverage:", err)
		return 1
	}
	missing, err := servertest.Unexercised()
	if err != nil {
		fmt.Fprintln(os.Stderr, "contract coverage:", err)
		return 1
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL contract coverage: %d of %d operations of server/openapi.yaml were never exercised through the validating client:\n", len(missing), len(ops))
		for _, o := range missing {
			fmt.Fprintf(os.Stderr, "\t%s\n", o)
		}
		fmt.Fprintln(os.Stderr, "Add a test in server/contract_<domain>_test.go that calls each of them via servertest.Env.Client or HTTPClient.")
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("contract coverage: all %d operations exercised\n", len(ops))
	}
	return 0
}
