// Package web serves Switchboard's pages: the hosted connect page, where an
// application's end users connect their accounts through a connect
// session, and the operator console. Both are server-rendered templates on
// one layout with scripts and styles embedded in the binary (no CDN, no
// inline script), behind one set of security headers and one CSRF helper.
// The console's own script calls the JSON API with the console session's
// cookie (see Console and Session.CheckWrite).
package web

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connect"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Routes of the pages.
const (
	ConnectPrefix = "/connect/"
	ConsoleRoute  = "/console"
	StaticPrefix  = "/static/"
)

// pages are the templates, each parsed with the layout.
var pages = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range []string{"connect", "message", "signin", "console"} {
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return out
}()

var funcs = template.FuncMap{
	"host": func(raw string) string {
		if u, err := url.Parse(raw); err == nil {
			return u.Host
		}
		return raw
	},
}

// Handler serves the pages.
type Handler struct {
	// Sessions runs connect sessions.
	Sessions *connect.Sessions
	// Console keeps console sessions.
	Console *Console
	// PublicBase is the server's public URL (no trailing slash) for r.
	PublicBase func(r *http.Request) string
	// CallbackURL is the OAuth 2.0 callback URL for r.
	CallbackURL func(r *http.Request) string
}

// Register adds the pages' routes to e.
func (h *Handler) Register(e *echo.Echo) {
	e.GET(ConnectPrefix+":token", h.showConnect)
	e.POST(ConnectPrefix+":token", h.submitConnect)
	e.POST(ConnectPrefix+":token/authorize", h.authorizeConnect)
	e.GET(ConnectPrefix+"sessions/:id/return", h.returnToConnect)
	e.GET(ConsoleRoute, h.showConsole)
	e.POST(ConsoleRoute+"/sign-in", h.signIn)
	e.POST(ConsoleRoute+"/sign-out", h.signOut)
	e.GET(StaticPrefix+":file", h.static)
}

// Owns reports whether path is one of the pages' (their errors are pages).
func Owns(path string) bool {
	return strings.HasPrefix(path, ConnectPrefix) || path == ConsoleRoute || strings.HasPrefix(path, ConsoleRoute+"/") || strings.HasPrefix(path, StaticPrefix)
}

// policy is a page's Content-Security-Policy; formTargets are the origins
// its forms may lead to besides this server (a redirect after a post
// counts).
func policy(formTargets ...string) string {
	action := "'self'"
	for _, t := range formTargets {
		if u, err := url.Parse(t); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
			action += " " + u.Scheme + "://" + u.Host
		}
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https: data:; connect-src 'self'; " +
		"form-action " + action + "; frame-ancestors 'none'; base-uri 'none'"
}

// secure sets the headers every page carries.
func secure(c echo.Context, csp string) {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// render writes page name with data at status.
func render(c echo.Context, status int, name string, data any) error {
	var buf bytes.Buffer
	if err := pages[name].Execute(&buf, data); err != nil {
		return errs.Wrap(errs.Internal, err, "render page "+name)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// messageView is a page that only says something.
type messageView struct {
	Title, Message, Code, RequestID string
	// Back is a link to offer ("" for none) and BackLabel its text.
	Back, BackLabel string
}

// WriteError answers a failed page request with a page saying what went
// wrong (the server's error handler calls it for the pages' routes).
func WriteError(c echo.Context, status int, e *errs.Error) {
	secure(c, policy())
	title := "Something went wrong"
	switch e.Kind {
	case errs.NotFound:
		title = "Not found"
	case errs.Gone:
		title = "This link can no longer be used"
	case errs.Forbidden:
		title = "Refused"
	case errs.Unauthenticated:
		title = "Sign in required"
	case errs.TooLarge, errs.Invalid, errs.Validation, errs.UnsupportedMedia:
		title = "That did not work"
	}
	v := messageView{Title: title, Message: e.Message, Code: string(e.Kind), RequestID: requestid.From(c.Request().Context())}
	if err := render(c, status, "message", v); err != nil {
		_ = c.String(status, e.Message)
	}
}

// static serves the embedded scripts and styles.
func (h *Handler) static(c echo.Context) error {
	name := c.Param("file")
	b, err := fs.ReadFile(staticFS, "static/"+path.Base(name))
	if err != nil || path.Base(name) != name {
		return errs.E(errs.NotFound, "no static file %q", name)
	}
	secure(c, policy())
	c.Response().Header().Set("Cache-Control", "no-cache")
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	return c.Blob(http.StatusOK, ct, b)
}

// ReturnURL is where the OAuth 2.0 callback sends the browser of a connect
// session back to: returnTo with the outcome (and the error's code, never
// its message) in its query.
func ReturnURL(returnTo string, err error) string {
	u, perr := url.Parse(returnTo)
	if perr != nil {
		return returnTo
	}
	q := u.Query()
	if err == nil {
		q.Set("outcome", "connected")
	} else {
		q.Set("outcome", "error")
		q.Set("code", string(errs.KindOf(err)))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// asError is err as an *errs.Error safe to show.
func asError(err error) *errs.Error {
	var e *errs.Error
	if errors.As(err, &e) {
		return e
	}
	return errs.E(errs.Internal, "internal error")
}
