package llm

import (
	"context"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// TestLoopOps_CarryToolTurnsToEveryProvider: the later model calls of the
// native tool loop (OpChatLoop, OpFunctionsLoop) send the assistant's tool
// calls and the tool results as each provider's wire expects them (the
// same requests as the OpenAI-compatible route's), while /v1/chat itself
// still refuses tool turns.
func TestLoopOps_CarryToolTurnsToEveryProvider(t *testing.T) {
	anth := anthropicFake(t)
	anthGateway, _ := newGateway(t, provider("anthropic", TypeAnthropic, anth.URL+"/v1", chatModel("claude-3-5-haiku-latest")))
	gem := geminiFake(t)
	gemGateway := geminiGateway(t, gem)
	tests := []struct {
		name    string
		g       *Gateway
		up      *fake
		model   string
		fixture string
	}{
		{"anthropic", anthGateway, anth, "anthropic/claude-3-5-haiku-latest", "anthropic/request_tools.json"},
		{"gemini", gemGateway, gem, "gemini/gemini-2.0-flash", "gemini/request_tools.json"},
	}
	for _, tc := range tests {
		for _, op := range []Op{OpChatLoop, OpFunctionsLoop} {
			t.Run(tc.name+" "+op.OpName(), func(t *testing.T) {
				res, err := tc.g.Complete(context.Background(), op, toolRequest(tc.model))
				if err != nil {
					t.Fatal(err)
				}
				assertJSON(t, tc.up.last(t).Body, fixture(t, tc.fixture))
				if len(res.ToolCalls) != 1 || res.ToolCalls[0].ID == "" || res.FinishReason != FinishToolCalls {
					t.Errorf("the model's next calls %+v (%s)", res.ToolCalls, res.FinishReason)
				}
			})
		}
		t.Run(tc.name+" chat refuses tool turns", func(t *testing.T) {
			_, err := tc.g.Complete(context.Background(), OpChat, toolRequest(tc.model))
			if errs.KindOf(err) != errs.Validation {
				t.Fatalf("err = %v, want validation_failed", err)
			}
		})
	}
}
