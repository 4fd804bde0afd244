package provider

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var _ resource.ResourceWithModifyPlan = (*connectorResource)(nil)

// ModifyPlan makes a change that moves stored credentials visible in the
// plan, as the server treats it: when base_url's scheme, host or port, the
// auth type, an apiKey's in, name or prefix, or an oauth2 token_url
// changes, the server drops the credentials stored for the old target and
// the connector's connections become reauth_required (a warning). An
// oauth2 token_url change (or, for client_credentials, a base_url origin
// change) that does not send the client secret again is refused by the
// server; it is an error here already.
func (r *connectorResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var plan, state connectorModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	why, at, known := credentialsMoved(state, plan)
	if !known || why == "" {
		return
	}
	name := state.ID.ValueString()
	pa := plan.Auth
	clientCredentials := pa != nil && pa.Type.ValueString() == "oauth2" && pa.Grant.ValueString() == "client_credentials"
	resp.Diagnostics.AddAttributeWarning(at, "Connections of connector "+name+" will need their credentials again",
		why+". Switchboard never sends stored credentials to a new place: on apply it drops the credentials stored for the "+
			"old target, and every connection of this connector becomes reauth_required until its credentials are supplied "+
			"again (switchboard_connection: change credentials_wo_version; OAuth 2.0 authorization_code: connect again). "+
			"OAuth 2.0 client_credentials connections stay active when the client secret is sent again.")
	if pa == nil || state.Auth == nil || pa.Type.ValueString() != "oauth2" || state.Auth.Type.ValueString() != "oauth2" {
		return
	}
	tokenMoved := !pa.TokenURL.Equal(state.Auth.TokenURL)
	if !tokenMoved && !(clientCredentials && origin(state.BaseURL.ValueString()) != origin(plan.BaseURL.ValueString())) {
		return
	}
	var secret types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("auth").AtName("client_secret_wo"), &secret)...)
	hasSecret := clientCredentials || !secret.IsNull()
	if hasSecret && !secretDue(stateWOVersion(state.Auth), pa.ClientSecretWOVersion, false) {
		what := "token_url changed"
		if !tokenMoved {
			what = "base_url moved to another origin"
		}
		resp.Diagnostics.AddAttributeError(path.Root("auth").AtName("client_secret_wo_version"), what+": send the client secret again",
			"The stored client secret is only sent to the place it was given for, so the server refuses this change "+
				"without the secret (auth.clientSecret). Set auth.client_secret_wo and change auth.client_secret_wo_version "+
				"in the same apply.")
	}
}

// credentialsMoved says why a change from state to plan moves stored
// credentials ("" when it does not), the attribute to blame, and whether
// it could tell (false while a value involved is unknown).
func credentialsMoved(state, plan connectorModel) (string, path.Path, bool) {
	if plan.BaseURL.IsUnknown() {
		return "", path.Path{}, false
	}
	if from, to := origin(state.BaseURL.ValueString()), origin(plan.BaseURL.ValueString()); from != to {
		return fmt.Sprintf("base_url moves from %s to %s", from, to), path.Root("base_url"), true
	}
	authType := func(a *authModel) string {
		if a == nil || a.Type.IsNull() {
			return "none"
		}
		return a.Type.ValueString()
	}
	sa, pa := state.Auth, plan.Auth
	if pa != nil && pa.Type.IsUnknown() {
		return "", path.Path{}, false
	}
	if authType(sa) != authType(pa) {
		return fmt.Sprintf("auth.type changes from %s to %s", authType(sa), authType(pa)), path.Root("auth").AtName("type"), true
	}
	if pa == nil {
		return "", path.Path{}, true
	}
	switch pa.Type.ValueString() {
	case "apiKey":
		if pa.In.IsUnknown() || pa.Name.IsUnknown() || pa.Prefix.IsUnknown() {
			return "", path.Path{}, false
		}
		keyName := func(a *authModel) string {
			if a.In.ValueString() == "header" {
				return http.CanonicalHeaderKey(a.Name.ValueString())
			}
			return a.Name.ValueString()
		}
		switch {
		case !pa.In.Equal(sa.In):
			return "the API key moves from the " + sa.In.ValueString() + " to the " + pa.In.ValueString(), path.Root("auth").AtName("in"), true
		case keyName(sa) != keyName(pa):
			return "the API key moves from " + sa.Name.ValueString() + " to " + pa.Name.ValueString(), path.Root("auth").AtName("name"), true
		case pa.Prefix.ValueString() != sa.Prefix.ValueString():
			return "auth.prefix changes", path.Root("auth").AtName("prefix"), true
		}
	case "oauth2":
		if pa.TokenURL.IsUnknown() {
			return "", path.Path{}, false
		}
		if !pa.TokenURL.Equal(sa.TokenURL) {
			return "auth.token_url changes", path.Root("auth").AtName("token_url"), true
		}
	}
	return "", path.Path{}, true
}

// origin is a URL's scheme, lower-case host and port (the scheme's default
// when none is given), as the server compares them.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
