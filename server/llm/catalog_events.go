package llm

import (
	"slices"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
)

// modelsDiff is what a rediscovery changed in one provider's models: the
// payload of llm.models_changed.
type modelsDiff struct {
	Provider string   `json:"provider"`
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
}

func (d modelsDiff) changed() bool { return len(d.Added) > 0 || len(d.Removed) > 0 }

// diffModels compares a provider's discovered models before and after a
// refresh, by id, leaving out the configured models (they stay in the
// catalog whatever discovery says). The lists are sorted.
func diffModels(provider string, configured, before, after []*Model) modelsDiff {
	d := modelsDiff{Provider: provider, Added: []string{}, Removed: []string{}}
	skip := map[string]bool{}
	for _, m := range configured {
		skip[m.ID] = true
	}
	old := map[string]bool{}
	for _, m := range before {
		old[m.ID] = true
	}
	now := map[string]bool{}
	for _, m := range after {
		now[m.ID] = true
		if !old[m.ID] && !skip[m.ID] {
			d.Added = append(d.Added, m.ID)
		}
	}
	for _, m := range before {
		if !now[m.ID] && !skip[m.ID] {
			d.Removed = append(d.Removed, m.ID)
		}
	}
	d.Added, d.Removed = sortedUnique(d.Added), sortedUnique(d.Removed)
	return d
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// modelsChanged logs and emits llm.models_changed for each provider whose
// models a rediscovery changed. The first discovery of a provider after a
// start emits nothing: it fills the catalog rather than changing it.
func (c *Catalog) modelsChanged(diffs []modelsDiff) {
	for _, d := range diffs {
		c.log.Info("discovered models changed", "provider", d.Provider, "added", d.Added, "removed", d.Removed)
		if c.events != nil {
			c.events.Emit(events.Pending{Type: events.ModelsChanged, Data: d})
		}
	}
}
