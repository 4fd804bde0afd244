package openapiimport_test

import (
	"bytes"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/openapiimport"
)

// FuzzImport: whatever the description, Import never panics, and every
// action it produces passes the server's validation and renders as HCL
// that parses.
func FuzzImport(f *testing.F) {
	for _, name := range []string{"petstore30.yaml", "api31.json", "swagger2.json"} {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(`{"swagger":"2.0","info":{"title":"x","version":"1"},"paths":{"/{a}":{"get":{"parameters":[{"name":"a","in":"path","required":true,"type":"array","items":{"type":"string"}}]}}}}`))
	f.Add([]byte(`openapi: 3.1.0
paths:
  /x/{a.b}:
    post:
      operationId: "9"
      parameters: [{name: a.b, in: path, required: true}]
      requestBody: {content: {"*/*": {schema: {oneOf: [{type: string}, {type: integer}]}}}}
`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := openapiimport.Import(bg, data, openapiimport.Options{Connector: "f", BaseURL: "https://f.example"})
		if err != nil {
			return
		}
		checkValid(t, res)
		out := openapiimport.HCL(res)
		if _, diags := hclwrite.ParseConfig(out, "f.tf", hcl.Pos{Line: 1, Column: 1}); diags.HasErrors() {
			t.Fatalf("HCL does not parse: %v\n%s", diags, out)
		}
		if !bytes.Contains(out, []byte(`resource "switchboard_connector" "f"`)) {
			t.Fatal("no connector resource")
		}
	})
}
