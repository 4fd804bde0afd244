package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// notMatchingValidator refuses strings that match a pattern.
type notMatchingValidator struct {
	re  *regexp.Regexp
	msg string
}

var _ validator.String = notMatchingValidator{}

// notMatching refuses a string matching re, saying msg.
func notMatching(re *regexp.Regexp, msg string) validator.String {
	return notMatchingValidator{re: re, msg: msg}
}

func (v notMatchingValidator) Description(context.Context) string { return v.msg }

func (v notMatchingValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v notMatchingValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if v.re.MatchString(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", fmt.Sprintf("%s %s.", req.Path, v.msg))
	}
}

// httpURLValidator accepts absolute http and https URLs with a host.
type httpURLValidator struct{}

var _ validator.String = httpURLValidator{}

// httpURL checks for an absolute http(s) URL with a host.
func httpURL() validator.String { return httpURLValidator{} }

func (v httpURLValidator) Description(context.Context) string {
	return "must be an absolute http:// or https:// URL with a host"
}

func (v httpURLValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v httpURLValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	u, err := url.Parse(s)
	switch {
	case err != nil:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid URL", fmt.Sprintf("%s: %q is not a URL: %v", req.Path, s, err))
	case u.Scheme != "http" && u.Scheme != "https":
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid URL", fmt.Sprintf("%s must be an absolute http:// or https:// URL, got %q.", req.Path, s))
	case u.Host == "" || u.Hostname() == "":
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid URL", fmt.Sprintf("%s: %q has no host.", req.Path, s))
	case u.User != nil:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid URL", fmt.Sprintf("%s must not carry credentials (user:password@); configure them as the connector's auth.", req.Path))
	}
}

// httpsOrLoopbackValidator accepts https URLs, and http URLs only on a
// loopback host, as the server does for what it shows end users' browsers.
type httpsOrLoopbackValidator struct{}

var _ validator.String = httpsOrLoopbackValidator{}

// httpsOrLoopback refuses an http:// URL whose host is not loopback
// (localhost, 127.0.0.0/8, ::1); combine it with httpURL.
func httpsOrLoopback() validator.String { return httpsOrLoopbackValidator{} }

func (httpsOrLoopbackValidator) Description(context.Context) string {
	return "must be an https:// URL (http:// only on a loopback host)"
}

func (v httpsOrLoopbackValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (httpsOrLoopbackValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || loopbackHost(u.Hostname()) {
		return // not a URL, or not http: httpURL says so
	}
	resp.Diagnostics.AddAttributeError(req.Path, "Insecure URL",
		fmt.Sprintf("%s must be an https:// URL (http:// only on a loopback host such as localhost), got %q: end users' browsers load it.", req.Path, s))
}

// loopbackHost reports whether host names this machine: localhost or a
// loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameInstantModifier plans the prior value of an RFC 3339 attribute when
// the configuration names the same instant differently (another offset), so
// that rewriting a timestamp is not a change.
type sameInstantModifier struct{}

var _ planmodifier.String = sameInstantModifier{}

// sameInstant keeps the state's timestamp when the configured one is the
// same instant.
func sameInstant() planmodifier.String { return sameInstantModifier{} }

func (sameInstantModifier) Description(context.Context) string {
	return "A timestamp naming the same instant as the current one is no change."
}

func (m sameInstantModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (sameInstantModifier) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.StateValue.IsNull() || req.PlanValue.IsNull() || req.PlanValue.IsUnknown() {
		return
	}
	a, err1 := time.Parse(time.RFC3339, req.StateValue.ValueString())
	b, err2 := time.Parse(time.RFC3339, req.PlanValue.ValueString())
	if err1 == nil && err2 == nil && a.Equal(b) {
		resp.PlanValue = req.StateValue
	}
}

// sameJSONModifier plans the prior value of a JSON attribute when the
// configuration holds the same JSON written differently (whitespace, key
// order), so that reformatting is not a change.
type sameJSONModifier struct{}

var _ planmodifier.String = sameJSONModifier{}

// sameJSON keeps the state's JSON when the configured JSON is equal to it.
func sameJSON() planmodifier.String { return sameJSONModifier{} }

func (sameJSONModifier) Description(context.Context) string {
	return "The same JSON written differently is no change."
}

func (m sameJSONModifier) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (sameJSONModifier) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.StateValue.IsNull() || req.PlanValue.IsNull() || req.PlanValue.IsUnknown() {
		return
	}
	var a, b any
	if json.Unmarshal([]byte(req.StateValue.ValueString()), &a) == nil &&
		json.Unmarshal([]byte(req.PlanValue.ValueString()), &b) == nil && canonicalJSON(a) == canonicalJSON(b) {
		resp.PlanValue = req.StateValue
	}
}
