// Package connectors holds connector and action definitions: their types,
// their validation, the `{{params.<name>}}` templates of action paths,
// headers and bodies, and the Service that stores them.
//
// A connector describes an external HTTP API (base URL and how credentials
// are sent); an action is one named, callable request to it with declared
// parameters. Both are stored in the "connectors" and "actions" buckets; an
// OAuth 2.0 client secret is sealed in the vault under ClientSecretRef and
// never stored in the record, returned, logged or recorded in an event.
package connectors

import (
	"time"
)

// Auth types of a connector.
const (
	AuthNone   = "none"
	AuthAPIKey = "apiKey"
	AuthBearer = "bearer"
	AuthBasic  = "basic"
	AuthOAuth2 = "oauth2"
)

// Where an apiKey credential is sent (Auth.In).
const (
	InHeader = "header"
	InQuery  = "query"
	InCookie = "cookie"
)

// OAuth 2.0 grants (Auth.Grant).
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// Parameter types (Parameter.Type).
const (
	TypeString  = "string"
	TypeNumber  = "number"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
	TypeArray   = "array"
	TypeObject  = "object"
)

// Parameter placements (Parameter.In); InQuery and InHeader also apply.
const (
	InPath = "path"
	InBody = "body"
)

// Connector is an external HTTP API that actions call.
type Connector struct {
	// Name identifies the connector: ^[a-z][a-z0-9_]{0,63}$, so that it is
	// usable as integrations.<name>. Immutable.
	Name string `json:"name"`
	// DisplayName is a human name.
	DisplayName string `json:"displayName,omitempty"`
	// Description says what the API is.
	Description string `json:"description,omitempty"`
	// BaseURL is the absolute http(s) URL action paths are joined to; it may
	// carry a path prefix, never a query or fragment.
	BaseURL string `json:"baseUrl"`
	// Auth says how credentials are sent.
	Auth Auth `json:"auth"`
	// ConnectPage presents the connector on the hosted connect page.
	ConnectPage *ConnectPage `json:"connectPage,omitempty"`
	// CreatedAt is when the connector was created (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when it was last replaced (UTC).
	UpdatedAt time.Time `json:"updatedAt"`
	// Version starts at 1 and increments on each replace (the ETag).
	Version int64 `json:"version"`
}

// ConnectPage is how the hosted connect page presents a connector to the
// end users connecting their accounts.
type ConnectPage struct {
	// LogoURL is an absolute https URL (http on loopback) of a logo.
	LogoURL string `json:"logoUrl,omitempty"`
	// HelpText is plain text shown under the form.
	HelpText string `json:"helpText,omitempty"`
	// TestAction is an action of the connector, taking no required
	// parameters, run with entered credentials before they are stored.
	TestAction string `json:"testAction,omitempty"`
}

// Connect page limits.
const (
	MaxHelpTextLength = 2000
)

// Auth is a connector's authentication configuration.
type Auth struct {
	// Type is none, apiKey, bearer, basic or oauth2.
	Type string `json:"type"`
	// Name is the header, query parameter or cookie carrying an apiKey.
	Name string `json:"name,omitempty"`
	// In is where an apiKey goes: header, query or cookie.
	In string `json:"in,omitempty"`
	// Prefix precedes an apiKey's value, e.g. "Token ".
	Prefix string `json:"prefix,omitempty"`
	// AuthorizationURL is the OAuth 2.0 authorization endpoint
	// (authorization_code grant).
	AuthorizationURL string `json:"authorizationUrl,omitempty"`
	// TokenURL is the OAuth 2.0 token endpoint.
	TokenURL string `json:"tokenUrl,omitempty"`
	// ClientID is the OAuth 2.0 client id.
	ClientID string `json:"clientId,omitempty"`
	// Scopes are the OAuth 2.0 scopes requested.
	Scopes []string `json:"scopes,omitempty"`
	// Grant is authorization_code or client_credentials.
	Grant string `json:"grant,omitempty"`
	// ClientSecret is write-only input: sealed in the vault under
	// ClientSecretRef, never stored in the record, never marshalled (so never
	// in a response, an event or a log). Empty on every value the Service
	// returns; on replace, empty keeps the stored secret.
	ClientSecret string `json:"-"`
	// HasClientSecret reports whether a client secret is stored (output only).
	HasClientSecret bool `json:"clientSecretSet"`
	// AuthorizationParams are extra query parameters of the OAuth 2.0
	// authorization URL (authorization_code), e.g. audience or prompt.
	AuthorizationParams map[string]string `json:"authorizationParams,omitempty"`
	// TokenParams are extra form parameters of the OAuth 2.0 code exchange
	// and client-credentials requests, e.g. audience or resource.
	TokenParams map[string]string `json:"tokenParams,omitempty"`
	// ClientAuth is how the OAuth 2.0 client authenticates at the token
	// endpoint: basic (HTTP Basic header, the default when empty) or body.
	ClientAuth string `json:"clientAuth,omitempty"`
	// RedirectURLs are where GET /v1/connectors/{name}/connect may send the
	// browser back after the callback (exact match; authorization_code).
	RedirectURLs []string `json:"redirectUrls,omitempty"`
}

// Action is one named request to a connector's API.
type Action struct {
	// Connector is the owning connector's name.
	Connector string `json:"connector"`
	// Name identifies the action within its connector (same syntax as a
	// connector name). Immutable.
	Name string `json:"name"`
	// Description says what the action does.
	Description string `json:"description,omitempty"`
	// Method is the HTTP method (upper case).
	Method string `json:"method"`
	// Path is a template joined to the connector's baseUrl, starting with
	// "/"; each {{params.<name>}} becomes one escaped path segment.
	Path string `json:"path"`
	// Parameters are the declared parameters by name; never nil on an
	// action the Service returns.
	Parameters map[string]Parameter `json:"parameters"`
	// Headers are header templates by header name; never nil on an action
	// the Service returns.
	Headers map[string]string `json:"headers"`
	// Body is a JSON value whose string leaves may be templates; a string
	// that is exactly one placeholder is replaced by the typed value (see
	// RenderBody). Nil for none.
	Body any `json:"body,omitempty"`
	// Transformation is JavaScript: the body of a function of (data,
	// response) returning the result (see transform.Compile).
	Transformation string `json:"transformation,omitempty"`
	// TimeoutMs bounds a call; 0 means the server's default.
	TimeoutMs int `json:"timeoutMs,omitempty"`
	// CreatedAt is when the action was created (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when it was last replaced (UTC).
	UpdatedAt time.Time `json:"updatedAt"`
	// Version starts at 1 and increments on each replace (the ETag).
	Version int64 `json:"version"`
}

// Parameter declares one parameter of an action.
type Parameter struct {
	// Type is string, number, integer, boolean, array or object.
	Type string `json:"type"`
	// Required parameters must be supplied (path parameters always are).
	Required bool `json:"required"`
	// Description says what the parameter is.
	Description string `json:"description,omitempty"`
	// Enum, when not empty, lists the allowed values.
	Enum []any `json:"enum,omitempty"`
	// Default applies when an optional parameter is not supplied.
	Default any `json:"default,omitempty"`
	// In places the parameter: path, query, header or body; empty lets the
	// invocation decide (path when named in the path template, else query
	// for GET, DELETE and HEAD, else a member of a JSON body).
	In string `json:"in,omitempty"`
}

// ClientSecretRef is the vault ref of a connector's OAuth 2.0 client secret.
func ClientSecretRef(connector string) string { return SecretPrefix(connector) + "clientSecret" }

// SecretPrefix is the vault ref prefix under which every secret belonging to
// a connector lives (its client secret, its connections' credentials):
// deleting the connector deletes them all, in the same transaction.
func SecretPrefix(connector string) string { return "connector/" + connector + "/" }
