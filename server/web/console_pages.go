package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// signInView is the console's sign-in page.
type signInView struct {
	Title, CSRF, Error string
}

// consoleView is the console's shell; console.js draws the rest.
type consoleView struct {
	Title       string
	CSRF        string
	PrincipalID string
	Scopes      string
	ExpiresAt   string
}

// showConsole is GET /console: the console, or its sign-in page.
func (h *Handler) showConsole(c echo.Context) error {
	r := c.Request()
	secure(c, policy())
	s, ok, err := h.Console.FromRequest(r)
	if !ok || errs.KindOf(err) == errs.Unauthenticated {
		if ok {
			clearConsoleCookie(c)
		}
		return render(c, http.StatusOK, "signin", signInView{Title: "Sign in", CSRF: consoleCSRF.token(c.Response(), r)})
	}
	if err != nil {
		return err
	}
	// The key may have been revoked or changed since sign-in.
	p, err := h.Console.Authn.Authenticate(r.Context(), s.Key)
	if err != nil {
		_ = h.Console.SignOut(r.Context(), cookieValue(r))
		clearConsoleCookie(c)
		return render(c, http.StatusOK, "signin", signInView{Title: "Sign in", CSRF: consoleCSRF.token(c.Response(), r),
			Error: "The API key of your session is no longer valid (revoked or expired): sign in again."})
	}
	return render(c, http.StatusOK, "console", consoleView{
		Title: "Console", CSRF: s.CSRF, PrincipalID: p.ID, Scopes: strings.Join(scopesOf(p), " "),
		ExpiresAt: s.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"),
	})
}

func scopesOf(p *auth.Principal) []string {
	var out []string
	for _, s := range auth.Scopes {
		if p.Has(s) {
			out = append(out, s)
		}
	}
	return out
}

// signIn is POST /console/sign-in.
func (h *Handler) signIn(c echo.Context) error {
	r := c.Request()
	if err := consoleCSRF.check(r); err != nil {
		return err
	}
	cookie, expires, err := h.Console.SignIn(r.Context(), r.PostFormValue("key"))
	if errs.KindOf(err) == errs.Unauthenticated {
		secure(c, policy())
		return render(c, http.StatusUnauthorized, "signin", signInView{Title: "Sign in", CSRF: consoleCSRF.token(c.Response(), r), Error: asError(err).Message})
	}
	if err != nil {
		return err
	}
	http.SetCookie(c.Response(), &http.Cookie{Name: ConsoleCookie, Value: cookie, Path: "/", Expires: expires,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	secure(c, policy())
	return c.Redirect(http.StatusSeeOther, ConsoleRoute)
}

// signOut is POST /console/sign-out.
func (h *Handler) signOut(c echo.Context) error {
	r := c.Request()
	s, ok, err := h.Console.FromRequest(r)
	if ok && err == nil {
		if !equal(r.PostFormValue(csrfField), s.CSRF) {
			return errs.E(errs.Forbidden, "this form's CSRF token does not match: reload the console and sign out again")
		}
		if err := sameOrigin(r); err != nil {
			return err
		}
		if err := h.Console.SignOut(r.Context(), cookieValue(r)); err != nil {
			return err
		}
	}
	clearConsoleCookie(c)
	secure(c, policy())
	return c.Redirect(http.StatusSeeOther, ConsoleRoute)
}

func cookieValue(r *http.Request) string {
	if ck, err := r.Cookie(ConsoleCookie); err == nil {
		return ck.Value
	}
	return ""
}

func clearConsoleCookie(c echo.Context) {
	http.SetCookie(c.Response(), &http.Cookie{Name: ConsoleCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.Request().TLS != nil, SameSite: http.SameSiteStrictMode})
}
