package runstate

import (
	"fmt"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// digester computes each item's digest at most once in one save: the same
// item (Items are immutable and one pointer wide, so the same value is the
// same item) is often digested as part of the batch and again as part of
// the turn it came from.
type digester struct {
	ignoreIDs bool
	memo      map[session.Item]string
}

func newDigester(ignoreIDs bool) *digester {
	return &digester{ignoreIDs: ignoreIDs, memo: map[session.Item]string{}}
}

// digests returns the digest of each item.
func (d *digester) digests(items []session.Item) ([]string, error) {
	out := make([]string, len(items))
	for i, it := range items {
		dg, ok := d.memo[it]
		if !ok {
			var err error
			if dg, err = history.Digest(it, d.ignoreIDs); err != nil {
				return nil, fmt.Errorf("runstate: digest item %d: %w", i, err)
			}
			d.memo[it] = dg
		}
		out[i] = dg
	}
	return out, nil
}

// counts returns how many times each digest occurs among items.
func (d *digester) counts(items []session.Item) (map[string]int, error) {
	ds, err := d.digests(items)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int, len(ds))
	for _, dg := range ds {
		m[dg]++
	}
	return m, nil
}
