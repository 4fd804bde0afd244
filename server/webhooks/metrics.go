package webhooks

import (
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// observeAttempt records one delivery attempt in
// switchboard_webhook_deliveries_total once tx commits: success, retry
// (failed, another attempt is scheduled) or failed (given up).
func observeAttempt(tx store.Tx, status string, d time.Duration) {
	outcome := metrics.OutcomeRetry
	switch status {
	case StatusSucceeded:
		outcome = metrics.OutcomeSuccess
	case StatusFailed:
		outcome = metrics.OutcomeFailed
	}
	tx.OnCommit(func() { metrics.ObserveWebhookDelivery(outcome, d) })
}
