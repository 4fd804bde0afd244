package web

import (
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connect"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
)

// connectView is the connect page.
type connectView struct {
	Title string
	// Action is the form's own URL; Authorize the OAuth button's.
	Action, Authorize string
	CSRF              string
	Name              string // the connector's display name
	Connector         connectors.Connector
	Connection        string
	ExpiresAt         string
	// Where the credential goes, in words ("the X-API-Key header").
	Placement string
	Host      string
	// Error is the message of a failed attempt; Field the field at fault.
	Error     string
	Problems  []errs.Problem
	RequestID string
}

func (v connectView) LogoURL() string {
	if v.Connector.ConnectPage != nil {
		return v.Connector.ConnectPage.LogoURL
	}
	return ""
}

func (v connectView) HelpText() string {
	if v.Connector.ConnectPage != nil {
		return v.Connector.ConnectPage.HelpText
	}
	return ""
}

// connectPolicy lets the page's forms lead to the provider's authorization
// page and back to the application.
func connectPolicy(p connect.Page) string {
	return policy(p.Connector.Auth.AuthorizationURL, p.Session.RedirectURL)
}

func newConnectView(c echo.Context, p connect.Page, csrf string) connectView {
	token := c.Param("token")
	cn := p.Connector
	name := cn.DisplayName
	if name == "" {
		name = cn.Name
	}
	v := connectView{
		Title: "Connect " + name, Action: connect.PagePath(token), Authorize: connect.PagePath(token) + "/authorize",
		CSRF: csrf, Name: name, Connector: cn, Connection: p.Session.Connection,
		ExpiresAt: p.Session.ExpiresAt.Format(time.RFC1123), RequestID: requestid.From(c.Request().Context()),
	}
	if u, err := url.Parse(cn.BaseURL); err == nil {
		v.Host = u.Host
	}
	switch cn.Auth.Type {
	case connectors.AuthAPIKey:
		noun := map[string]string{connectors.InHeader: "header", connectors.InQuery: "query parameter", connectors.InCookie: "cookie"}[cn.Auth.In]
		v.Placement = "the " + cn.Auth.Name + " " + noun
	case connectors.AuthBearer:
		v.Placement = "the Authorization header (Bearer)"
	case connectors.AuthBasic:
		v.Placement = "the Authorization header (Basic)"
	}
	return v
}

// showConnect is GET /connect/{token}.
func (h *Handler) showConnect(c echo.Context) error {
	p, err := h.Sessions.Open(c.Request().Context(), c.Param("token"))
	if err != nil {
		return err
	}
	secure(c, connectPolicy(p))
	return render(c, http.StatusOK, "connect", newConnectView(c, p, connectCSRF.token(c.Response(), c.Request())))
}

// submitConnect is POST /connect/{token}: the entered credentials.
func (h *Handler) submitConnect(c echo.Context) error {
	r := c.Request()
	if err := connectCSRF.check(r); err != nil {
		return err
	}
	ctx := r.Context()
	token := c.Param("token")
	cred := connectors.Credentials{
		APIKey: r.PostFormValue("apiKey"), Token: r.PostFormValue("token"),
		Username: r.PostFormValue("username"), Password: r.PostFormValue("password"),
	}
	done, err := h.Sessions.Submit(ctx, token, cred, requestid.From(ctx))
	if err == nil {
		return h.connected(c, done)
	}
	e := asError(err)
	if e.Kind != errs.Validation && e.Kind != errs.Invalid {
		return err
	}
	// The form again, with what was wrong; never the values entered.
	p, oerr := h.Sessions.Open(ctx, token)
	if oerr != nil {
		return oerr
	}
	secure(c, connectPolicy(p))
	v := newConnectView(c, p, connectCSRF.token(c.Response(), r))
	v.Error = e.Message
	if ps, ok := e.Details["problems"].([]errs.Problem); ok {
		v.Problems = ps
	}
	return render(c, e.Kind.Status(), "connect", v)
}

// connected answers a completed session: back to the application, or a
// page saying it is done.
func (h *Handler) connected(c echo.Context, done connect.Completed) error {
	if done.Redirect != "" {
		secure(c, policy(done.Redirect))
		return c.Redirect(http.StatusSeeOther, done.Redirect)
	}
	secure(c, policy())
	return render(c, http.StatusOK, "message", messageView{
		Title:   "Connected",
		Message: "Your account is connected (connection \u201c" + done.Session.Connection + "\u201d of \u201c" + done.Session.Connector + "\u201d). You can close this window.",
	})
}

// authorizeConnect is POST /connect/{token}/authorize: into the OAuth 2.0
// authorization.
func (h *Handler) authorizeConnect(c echo.Context) error {
	r := c.Request()
	if err := connectCSRF.check(r); err != nil {
		return err
	}
	to, err := h.Sessions.Authorize(r.Context(), connect.AuthorizeInput{
		Token: c.Param("token"), CallbackURL: h.CallbackURL(r),
		ReturnTo: func(id string) string { return h.PublicBase(r) + connect.ReturnPath(id) },
	})
	if err != nil {
		return err
	}
	secure(c, policy(to))
	return c.Redirect(http.StatusSeeOther, to)
}

// returnToConnect is GET /connect/sessions/{id}/return, after the OAuth
// 2.0 callback.
func (h *Handler) returnToConnect(c echo.Context) error {
	r := c.Request()
	ctx := r.Context()
	id := c.Param("id")
	if r.URL.Query().Get("outcome") != "connected" {
		sess, err := h.Sessions.Get(ctx, id)
		if err != nil {
			return err
		}
		secure(c, policy())
		v := messageView{Title: "Not connected", Message: authorizationFailure(r.URL.Query().Get("code")) +
			" Nothing was stored. To try again, go back and use the button once more.", Code: r.URL.Query().Get("code"),
			RequestID: requestid.From(ctx)}
		if sess.RedirectURL != "" {
			v.Back, v.BackLabel = connect.WithOutcome(sess.RedirectURL, sess.Connector, sess.Connection, "error"), "Return to the application"
		}
		return render(c, http.StatusOK, "message", v)
	}
	done, err := h.Sessions.Return(ctx, id, requestid.From(ctx))
	if err != nil {
		return err
	}
	return h.connected(c, done)
}

// authorizationFailure says in words why an authorization failed, from
// the error code the callback passed on.
func authorizationFailure(code string) string {
	switch errs.Kind(code) {
	case errs.Forbidden:
		return "You declined the authorization at the provider."
	case errs.Upstream, errs.UpstreamTimeout:
		return "The provider refused the authorization or could not be reached."
	case errs.Invalid:
		return "The authorization expired or was already used."
	}
	return "The authorization did not complete."
}
