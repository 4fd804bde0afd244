package server

import (
	_ "embed"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// openapiYAML is the whole spec. The generated server/api embeds it too,
// but without the operations the strict server leaves to hand-written
// handlers (the MCP endpoints), which must still be described, served and
// scoped.
//
//go:embed openapi.yaml
var openapiYAML []byte

// LoadSpec parses the OpenAPI document of every route.
func LoadSpec() (*openapi3.T, error) {
	return openapi3.NewLoader().LoadFromData(openapiYAML)
}

// loadedSpec is LoadSpec's document, parsed once and shared: never modified.
var loadedSpec = sync.OnceValues(LoadSpec)
