package responses_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/responses"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// BenchmarkKeeper measures keeping a response of about 2 KB on bbolt: Put
// on the request path and its share of the background flush.
func BenchmarkKeeper(b *testing.B) {
	st, err := store.OpenBolt(filepath.Join(b.TempDir(), "r.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k := responses.New(st, responses.Options{Logger: quiet(), FlushInterval: time.Hour})
	defer k.Close(bg)
	resp := json.RawMessage(benchResponse)
	input := json.RawMessage(`[{"role":"user","content":"Say hello in five words."}]`)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k.Put(&responses.Stored{ID: fmt.Sprintf("resp_%012x%020d", time.Now().UnixMilli(), i), Owner: "key_0123456789", Input: input, Response: resp})
		i++
		if i%1024 == 0 {
			if err := k.Flush(bg); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchResponse is a response object as /openai/v1/responses answers it:
// a paragraph of text and the usual members.
const benchResponse = `{"id":"resp_0193a1b2c3d4e5f60718293a4b","object":"response","created_at":1764072000,"completed_at":1764072001,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":256,"model":"mock/bench","output":[{"id":"msg_0193a1b2c3d4e5f60718293a4c","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Gateways sit between applications and the models they call: they authenticate each caller, apply rate limits and budgets, choose a provider, translate between wire formats, retry or fall back when an upstream fails, and record what every call used and cost. Keeping a response for later retrieval means writing it somewhere durable without slowing down the call that produced it.","annotations":[],"logprobs":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_p":1,"truncation":"disabled","background":false,"usage":{"input_tokens":14,"input_tokens_details":{"cached_tokens":0},"output_tokens":72,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":86},"user":null,"safety_identifier":null,"metadata":{}}`
