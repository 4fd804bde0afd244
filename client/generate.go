// Package client is the Go client of the Switchboard API: generated from
// server/openapi.yaml by oapi-codegen, with a thin hand-written layer.
package client

//go:generate go tool oapi-codegen -config config.yaml ../server/openapi.yaml
