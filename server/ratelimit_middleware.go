package server

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/budget"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ratelimit"
)

// rateLimit counts every authenticated request against its credential's
// requests-per-minute bucket on the route's plane (the spec's
// x-switchboard-plane), sets the RateLimit-* headers of that bucket on the
// response and refuses with 429 rate_limited (Retry-After set) when it is
// empty. With Redis (shared limits) down and redis.failMode closed it
// refuses with 503 unavailable. It runs after authentication; public
// routes are not limited. The token headers of LLM calls are added later,
// through the response headers that requestID put in the context.
//
// A model call (a POST that needs the llm scope) is counted by its
// admission together with its token reservation, in one decision (one
// round trip to Redis); a model call that never reaches admission (an
// invalid body, an unknown model) is counted after its answer, and is not
// refused: it spent nothing upstream.
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		p := auth.FromContext(ctx)
		if p == nil {
			return next(c)
		}
		// authenticate set a principal, so the route is in the spec.
		route := s.scopes[routeKey{c.Request().Method, c.Path()}]
		if route.modelCall {
			d := &deferredRequest{plane: route.plane}
			c.SetRequest(c.Request().WithContext(context.WithValue(ctx, deferredRequestKey{}, d)))
			err := next(c)
			if !d.counted {
				if res, lerr := s.limiter.AllowRequest(ctx, p, route.plane); lerr == nil && !c.Response().Committed {
					res.SetHeaders(c.Response().Header())
				}
			}
			return err
		}
		res, err := s.limiter.AllowRequest(ctx, p, route.plane)
		if err != nil {
			return err
		}
		res.SetHeaders(c.Response().Header())
		if err := s.refusal(p, res); err != nil {
			return err
		}
		return next(c)
	}
}

// refusal is nil when res admits p's request, else its 429 rate_limited,
// reported as ratelimit.exceeded.
func (s *Server) refusal(p *auth.Principal, res ratelimit.Result) error {
	if res.Allowed {
		return nil
	}
	err := res.Err()
	s.limitEvents.refused(p, err)
	return err
}

// deferredRequest is a model call's request count, left by rateLimit to
// the call's admission.
type deferredRequest struct {
	plane   ratelimit.Plane
	counted bool
}

type deferredRequestKey struct{}

// llmAdmission admits every model call (native, OpenAI-compatible,
// embeddings, streaming or not) before it goes upstream: the credential's
// spend budget first, then its tokens-per-minute limit. Each reserves the
// call's worst case and settles with the actual usage (and the cost of the
// model that actually answered) when the call or stream ends. A stream
// already admitted is never cut off; usage beyond its reservation is
// charged to the next calls. A refusal by the limiter is reported as
// ratelimit.exceeded.
type llmAdmission struct {
	l      ratelimit.Limiter
	budget *budget.Tracker
	events *rateLimitEvents
}

var _ llm.Admission = llmAdmission{}

// defaultReservedCompletion is reserved for completion tokens when a call
// sets no maxTokens; the actual usage is charged in any case.
const defaultReservedCompletion = 1024

func (a llmAdmission) Admit(ctx context.Context, m *llm.Model, r *llm.Request) (func(*llm.Model, llm.Usage), error) {
	p := auth.FromContext(ctx)
	worst := reserveUsage(m, r)
	var spend *budget.Reservation
	if p != nil && p.Budget != nil && a.budget != nil {
		var err error
		if spend, err = a.budget.Admit(ctx, budget.CredentialOf(p), m.Cost(worst)); err != nil {
			return nil, err
		}
	}
	var (
		res *ratelimit.Reservation
		err error
	)
	if d, _ := ctx.Value(deferredRequestKey{}).(*deferredRequest); d != nil && !d.counted && p != nil {
		// The request and its tokens in one decision (see rateLimit).
		d.counted = true
		var req ratelimit.Result
		req, res, err = a.l.AdmitCall(ctx, p, d.plane, worst.Total())
		if err == nil && !req.Allowed {
			err = req.Err()
		}
	} else {
		res, err = a.l.Reserve(ctx, p, worst.Total())
	}
	if err != nil {
		spend.Settle(0)
		a.events.refused(p, err)
		return nil, err
	}
	if res == nil && spend == nil {
		return nil, nil
	}
	return func(answered *llm.Model, u llm.Usage) {
		if res != nil {
			res.Settle(u.Total())
		}
		if spend != nil {
			cost := 0.0
			if answered != nil {
				cost = answered.Cost(u)
			}
			spend.Settle(cost)
		}
	}, nil
}

// reserveUsage is a call's worst case: the prompt, estimated at 4 bytes a
// token without running the tokenizer on the hot path, plus maxTokens (or
// defaultReservedCompletion, capped by the model's limit).
func reserveUsage(m *llm.Model, r *llm.Request) llm.Usage {
	n := len(r.Prompt)
	for _, msg := range r.Messages {
		n += len(msg.Content) + 4
	}
	for _, t := range r.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	prompt := (n + 3) / 4
	completion := defaultReservedCompletion
	if r.MaxTokens != nil && *r.MaxTokens > 0 {
		completion = *r.MaxTokens
	} else if m != nil && m.MaxTokens > 0 && m.MaxTokens < completion {
		completion = m.MaxTokens
	}
	if m != nil && m.Has(llm.CapEmbeddings) {
		completion = 0
	}
	return llm.Usage{PromptTokens: prompt, CompletionTokens: completion}
}
